"""The idle policy as the engine applies it: `owl.idle.state.judge`, on data."""

from __future__ import annotations

import pytest

from owl.idle.state import INPUT_POLL, POWER_POLL, RETRY, judge

AFTER = 600.0


@pytest.mark.parametrize("idle_for,on_ac,require_ac,hooks,watching,want", [
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
])
def test_judge(idle_for, on_ac, require_ac, hooks, watching, want) -> None:
    v = judge(idle_for, on_ac, after=AFTER, require_ac=require_ac, hooks_live=hooks,
              problem="gone", watching=watching)
    assert (v.in_use, v.power_ok, v.reason, v.recheck_in) == want
