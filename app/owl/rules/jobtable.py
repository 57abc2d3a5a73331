"""The Job's lifecycle: every state, every event and every transition, as one table.

Theory of operation
-------------------

A Job is a standing intent; its Runs come and go (`lifecycle` owns those). What
a Job *is* at any moment is one of seven states, and it changes only by one of
the events below. Each row of `TABLE` says, for one event, which states it may
happen in, which state follows, whether it spends one of the Job's attempts,
and the words a person sees when it is refused:

    event          from                           to          spends
    start          pending                        active
    interrupted    active                         pending
    failed         active                         pending     yes  (attempts left)
    failed_last    active                         exhausted   yes  (the last attempt)
    checks_last    active                         blocked     yes  (checks failed on every attempt)
    succeeded      active                         review
    broken         pending active review exhausted blocked         (the worktree cannot be used)
    setup_failed   pending active                 blocked
    recovered      active                         pending          (a crash: the Run was cut short)
    verified       blocked exhausted              review           (`owl jobs verify` passed)
    accept         review                         done
    accept_anyway  review blocked exhausted       done             (past failing checks, asked for)
    reply          review blocked exhausted       pending
    extend         exhausted blocked pending      pending
    move           pending                        pending
    verify         review blocked exhausted       (unchanged)
    drop           every state but done and cancelled   cancelled

The store records what this table decides and decides nothing itself; verbs
ask `refusal` whether an event may happen and show its words when not. The
sets `QUEUED` (in the queue, with a position) and `NEEDS_YOU` (waiting for the
person) are the only spelling of those ideas in the code.

Pure: nothing of Owl's, no clock, no I/O, so the whole table is table-tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    BLOCKED = "blocked"
    REVIEW = "review"
    DONE = "done"
    CANCELLED = "cancelled"
    EXHAUSTED = "exhausted"


STATES: tuple[str, ...] = tuple(s.value for s in State)
QUEUED: tuple[str, ...] = (State.PENDING.value, State.ACTIVE.value)
NEEDS_YOU: tuple[str, ...] = (State.REVIEW.value, State.BLOCKED.value, State.EXHAUSTED.value)
ENDED: tuple[str, ...] = (State.DONE.value, State.CANCELLED.value)


class Event(StrEnum):
    START = "start"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    FAILED_LAST = "failed_last"
    CHECKS_LAST = "checks_last"
    SUCCEEDED = "succeeded"
    BROKEN = "broken"
    SETUP_FAILED = "setup_failed"
    RECOVERED = "recovered"
    VERIFIED = "verified"
    ACCEPT = "accept"
    ACCEPT_ANYWAY = "accept_anyway"
    REPLY = "reply"
    EXTEND = "extend"
    MOVE = "move"
    VERIFY = "verify"
    DROP = "drop"


@dataclass(frozen=True)
class Row:
    """One event: where it may happen, what follows, and what a refusal says."""

    allowed: frozenset[State]
    to: State | None  # None: the state does not change
    spends_attempt: bool = False
    refused: str = ""  # "{id} is {state}" + this, when it may not happen


_P, _A, _B, _R, _D, _C, _X = (
    State.PENDING,
    State.ACTIVE,
    State.BLOCKED,
    State.REVIEW,
    State.DONE,
    State.CANCELLED,
    State.EXHAUSTED,
)
_WAITING = frozenset({_R, _B, _X})

TABLE: dict[Event, Row] = {
    Event.START: Row(frozenset({_P}), _A),
    Event.INTERRUPTED: Row(frozenset({_A}), _P),
    Event.FAILED: Row(frozenset({_A}), _P, spends_attempt=True),
    Event.FAILED_LAST: Row(frozenset({_A}), _X, spends_attempt=True),
    Event.CHECKS_LAST: Row(frozenset({_A}), _B, spends_attempt=True),
    Event.SUCCEEDED: Row(frozenset({_A}), _R),
    Event.BROKEN: Row(frozenset({_P, _A, _R, _X, _B}), _B),
    Event.SETUP_FAILED: Row(frozenset({_P, _A}), _B),
    Event.RECOVERED: Row(frozenset({_A}), _P),
    Event.VERIFIED: Row(frozenset({_B, _X}), _R),
    Event.ACCEPT: Row(frozenset({_R}), _D, refused=", not in review"),
    Event.ACCEPT_ANYWAY: Row(
        _WAITING, _D, refused="; only a Job in review, blocked or exhausted is accepted"
    ),
    Event.REPLY: Row(
        _WAITING, _P, refused="; only a Job in review, blocked or exhausted takes a reply"
    ),
    Event.EXTEND: Row(
        frozenset({_X, _B, _P}),
        _P,
        refused="; only an exhausted, blocked or pending job takes more attempts",
    ),
    Event.MOVE: Row(frozenset({_P}), _P, refused="; only pending jobs move"),
    Event.VERIFY: Row(
        _WAITING,
        None,
        refused="; only a Job in review, blocked or exhausted is verified on "
        "demand (a queued Job's checks run after its next Run)",
    ),
    Event.DROP: Row(frozenset(State) - {_D, _C}, _C),
}


class NotAllowed(ValueError):
    """An event asked of a Job in a state the table does not allow it in."""


def allows(event: Event, state: str) -> bool:
    return State(state) in TABLE[event].allowed


def after(event: Event, state: str) -> State:
    """The state that follows `event` in `state`; NotAllowed where the table has no row."""
    row = TABLE[event]
    if State(state) not in row.allowed:
        raise NotAllowed(f"{event.value} is not allowed in {state}")
    return State(state) if row.to is None else row.to


def refusal(event: Event, job_id: int, state: str) -> str | None:
    """None when `event` may happen to Job `job_id` in `state`; else the one line that says why not."""
    if allows(event, state):
        return None
    return f"job {job_id} is {state}{TABLE[event].refused}"


def run_end(
    outcome: str,
    *,
    failures: int,
    attempts: int,
    checks_failed: bool = False,
    succeeded_to: State | None = None,
) -> Event:
    """The event a Run's end (`lifecycle`'s outcome, as judged by `jobrules`) is for its Job.

    `failures` counts the failed Runs before this one. A failure that spends the
    last attempt exhausts the Job, or blocks it when its checks failed (the
    agent's work exists but does not pass: a person must look). `succeeded_to`
    lets a success block the Job instead (a workspace that cannot be used)."""
    if outcome == "interrupted":
        return Event.INTERRUPTED
    if outcome == "failed":
        if failures + 1 < attempts:
            return Event.FAILED
        return Event.CHECKS_LAST if checks_failed else Event.FAILED_LAST
    if succeeded_to is State.BLOCKED:
        return Event.BROKEN
    return Event.SUCCEEDED
