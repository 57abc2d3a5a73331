"""The idle policy as the engine applies it: `owl.idle.state.judge`, on data; and
the screen lock as its sources say it, combined (`owl.idle.screenlock.ScreenLock`)."""

from __future__ import annotations

import pytest

from owl.idle.screenlock import ScreenLock
from owl.idle.state import (
    INPUT_POLL,
    LOCKED_AFTER,
    POWER_POLL,
    RETRY,
    away,
    judge,
    quiet_enough,
)

AFTER = 600.0


@pytest.mark.parametrize(
    "idle_for,on_ac,require_ac,hooks,watching,want",
    [
        # quiet long enough, on AC, hooks live: may work; only input changes that
        (700.0, True, False, True, True, (False, True, None, None)),
        # in use: look again when `after` is reached
        (100.0, True, False, True, True, (True, True, "in use", 500.0)),
        # in use and on battery with AC required: in use is the stronger fact, and
        # the core still hears that power forbids work
        (100.0, False, True, True, True, (True, False, "in use", POWER_POLL)),
        (700.0, False, True, True, True, (False, False, "on battery", POWER_POLL)),
        (700.0, None, True, True, True, (False, False, "power unknown", POWER_POLL)),
        # battery without AC required: power is no reason
        (700.0, False, False, True, True, (False, True, None, None)),
        # no input events: poll for the person's return, but only while something runs
        (700.0, True, False, False, True, (False, True, None, INPUT_POLL)),
        (700.0, True, False, False, False, (False, True, None, None)),
        # input that cannot be read counts as in use, and is read again soon
        (None, True, False, False, True, (True, True, "input cannot be read: gone", RETRY)),
    ],
)
def test_judge(idle_for, on_ac, require_ac, hooks, watching, want) -> None:
    v = judge(
        idle_for,
        on_ac,
        after=AFTER,
        require_ac=require_ac,
        hooks_live=hooks,
        problem="gone",
        watching=watching,
    )
    assert (v.in_use, v.power_ok, v.reason, v.recheck_in) == want


@pytest.mark.parametrize(
    "idle_for,locked,want",
    [
        # locked: a few quiet seconds are enough (the lock key, a touch at the lock screen)
        (LOCKED_AFTER, True, (False, None)),
        (2.0, True, (True, LOCKED_AFTER - 2.0)),
        # unlocked, or no desktop says: idle.after as always
        (LOCKED_AFTER, False, (True, AFTER - LOCKED_AFTER)),
        (LOCKED_AFTER, None, (True, AFTER - LOCKED_AFTER)),
        # input that cannot be read is in use, locked or not
        (None, True, (True, RETRY)),
    ],
)
def test_a_locked_screen_needs_only_a_little_quiet(idle_for, locked, want) -> None:
    v = judge(idle_for, True, after=AFTER, require_ac=False, hooks_live=True, locked=locked)
    assert (v.in_use, v.recheck_in) == want


def test_a_locked_screen_is_away_at_once_and_unlocking_is_presence() -> None:
    assert away(0.0, after=AFTER, locked=True)
    assert not away(0.0, after=AFTER, locked=False)
    assert away(AFTER, after=AFTER, locked=None)
    assert not away(None, after=AFTER, locked=None)  # unreadable: nobody vouches they left
    assert quiet_enough(5.0, locked=True) == 5.0  # a shorter idle.after stays


class Said:
    """A lock source that says what the test tells it (no bus, no thread)."""

    name = "said"

    def __init__(self) -> None:
        self.locked: bool | None = None
        self._tell = lambda: None

    def start(self, on_change) -> None:
        self._tell = on_change

    def stop(self) -> None:
        pass

    def say(self, locked: bool | None) -> None:
        self.locked = locked
        self._tell()


def test_the_screen_is_locked_while_any_source_says_so() -> None:
    a, b = Said(), Said()
    lock = ScreenLock([a, b])  # type: ignore[list-item]
    changes = []
    lock.start(lambda: changes.append(lock.locked))
    assert lock.locked is None and lock.heard == []
    b.say(False)
    a.say(True)
    b.say(False)  # no change: nothing told
    a.say(None)  # the screensaver left: logind's word stands
    assert changes == [False, True, False] and lock.heard == ["said"]
    b.say(None)
    assert lock.locked is None and changes[-1] is None
