"""When Owl should keep the machine awake: a pure rule, kept apart from I/O.

Only work in progress deserves the lock. A frozen Run is waiting for the
person to leave again; it gains nothing from a machine that stays up, and
holding the lock then would keep the person's own laptop from sleeping while
they use it. An ending Run is seconds from gone. Queued Jobs are not Runs yet.
"""

from __future__ import annotations

from collections.abc import Iterable

# Run states in which an agent or a check is doing work.
WORKING_STATES = frozenset({"running", "verifying"})


def should_hold(run_states: Iterable[str]) -> bool:
    """True iff any state is "running" or "verifying"."""
    return any(state in WORKING_STATES for state in run_states)


def hold_for_queue(wanted: bool, waiting: bool, on_ac: bool | None, paused: bool) -> bool:
    """`power.hold_while_queued`: Jobs wait and the machine is on AC (known so,
    never on a battery or when unknown), and Owl is not paused: a desktop whose own
    idle timer would suspend it before Owl's `idle.after` stays up to reach it."""
    return wanted and waiting and on_ac is True and not paused
