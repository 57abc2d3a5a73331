"""A verb the engine could not get to in time is withdrawn, never carried out
later behind the person's back, and the refusal says so in words."""

from __future__ import annotations

import threading
import time

import pytest

from owl.errors import Refused
from test_engine_sleep import engine_in


def test_a_call_that_times_out_is_withdrawn_and_never_runs(tmp_path):
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        busy = threading.Event()

        def hold() -> None:
            busy.set()
            time.sleep(1.5)  # the engine thread busy (a stand-in for a slow step)

        threading.Thread(target=lambda: e.call(hold), daemon=True).start()
        assert busy.wait(5)
        ran = []
        with pytest.raises(Refused, match="nothing was done; try again in a moment"):
            e.call(lambda: ran.append(1), timeout=0.3)
        e.call(lambda: None, timeout=10)  # the engine got past the slow step
        assert ran == []
    finally:
        assert e.stop(10)


def test_a_call_queued_as_the_engine_stops_is_answered_at_once(tmp_path):
    """The caller saw a running engine, and the engine stopped (and answered
    its queue) before the call was queued: the call is refused at once, not
    after its 30 s, so a stopping daemon is never held up by it."""
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    assert e.stop(10)

    class SeenRunningOnce:
        """The engine's stopped flag as a caller racing the stop sees it."""

        def __init__(self, real) -> None:
            self.real, self.looks = real, 0

        def is_set(self) -> bool:
            self.looks += 1
            return self.looks > 1 and self.real.is_set()

    e._stopped = SeenRunningOnce(e._stopped)
    t = time.monotonic()
    with pytest.raises(Refused, match="the daemon is stopping"):
        e.call(lambda: None, timeout=30)
    assert time.monotonic() - t < 5
