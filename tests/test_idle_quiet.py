"""The Wayland idle protocols' notifications turned into "seconds since the last input".

`Quiet` is pure (no I/O, no clock): driven here with made-up moments. The
same object reads real compositors in test_idle_wayland.py.
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from owl.idle.wayland import FINE, Quiet, _timeouts


def test_unknown_until_the_short_notification_idles_then_exact() -> None:
    q = Quiet(now=100.0)
    assert q.idle_seconds(100.5) == 0.0  # input may have come just now
    q.idled(1.0, now=101.0)  # quiet for 1 s at 101: last input at 100
    assert q.idle_seconds(101.0) == 1.0
    assert q.idle_seconds(130.0) == 30.0
    q.idled(600.0, now=700.0)  # the long one agrees
    assert q.idle_seconds(701.0) == 601.0


def test_input_resets_it_until_the_next_idled() -> None:
    q = Quiet(now=0.0)
    q.idled(1.0, now=5.0)
    q.resumed(now=9.0)
    assert q.idle_seconds(9.5) == 0.0
    q.idled(1.0, now=12.0)
    assert q.idle_seconds(15.0) == 4.0


def test_the_notifications_held_for_idle_after() -> None:
    assert _timeouts(600.0) == [FINE, 600.0]
    assert _timeouts(1.0) == [0.5, 1.0]  # the short one stays shorter
    assert _timeouts(0.5) == [0.25, 0.5]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["idled-fine", "idled-long", "resumed"]),
            st.floats(0, 5, allow_nan=False),
        ),
        max_size=30,
    )
)
def test_never_more_than_the_time_since_the_start_or_the_last_input(events) -> None:
    now, q, last = 0.0, Quiet(now=0.0), 0.0
    for kind, step in events:
        now += step
        if kind == "resumed":
            q.resumed(now)
            last = now
        elif now - last >= (1.0 if kind == "idled-fine" else 10.0):
            q.idled(1.0 if kind == "idled-fine" else 10.0, now)  # as a compositor would
        assert 0.0 <= q.idle_seconds(now) <= now - last + 1e-9
