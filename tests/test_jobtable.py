"""The Job's table (owl.rules.jobtable): every event in every state, and the store
recording what it decides."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from owl.rules import jobtable
from owl.rules.jobtable import Event, State
from owl.rules.lifecycle import shown_outcome, shown_run_outcome
from owl.store.db import Store

P, A, B, R, D, C, X = ("pending", "active", "blocked", "review", "done", "cancelled", "exhausted")

# (event, state it happens in) -> the state after; every pair not listed is refused.
ALLOWED = {
    (Event.START, P): A,
    (Event.INTERRUPTED, A): P,
    (Event.RECOVERED, A): P,
    (Event.FAILED, A): P,
    (Event.FAILED_LAST, A): X,
    (Event.CHECKS_LAST, A): B,
    (Event.SUCCEEDED, A): R,
    **{(Event.BROKEN, s): B for s in (P, A, R, X, B)},
    (Event.SETUP_FAILED, P): B,
    (Event.SETUP_FAILED, A): B,
    (Event.VERIFIED, B): R,
    (Event.VERIFIED, X): R,
    (Event.ACCEPT, R): D,
    **{(Event.ACCEPT_ANYWAY, s): D for s in (R, B, X)},
    **{(Event.REPLY, s): P for s in (R, B, X)},
    **{(Event.EXTEND, s): P for s in (X, B, P)},
    (Event.MOVE, P): P,
    **{(Event.VERIFY, s): s for s in (R, B, X)},
    **{(Event.DROP, s): C for s in (P, A, B, R, X)},
}


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("state", jobtable.STATES)
def test_every_event_in_every_state(event: Event, state: str) -> None:
    want = ALLOWED.get((event, state))
    if want is None:
        assert not jobtable.allows(event, state)
        with pytest.raises(jobtable.NotAllowed):
            jobtable.after(event, state)
        assert jobtable.refusal(event, 7, state).startswith(f"job 7 is {state}")
    else:
        assert jobtable.after(event, state) == want
        assert jobtable.refusal(event, 7, state) is None


def test_refusals_say_why_in_one_line() -> None:
    assert jobtable.refusal(Event.ACCEPT, 4, B) == "job 4 is blocked, not in review"
    assert jobtable.refusal(Event.MOVE, 2, R) == "job 2 is review; only pending jobs move"
    assert "takes a reply" in jobtable.refusal(Event.REPLY, 2, P)
    for event in Event:
        for state in jobtable.STATES:
            said = jobtable.refusal(event, 1, state)
            assert said is None or "\n" not in said


def test_ended_states_leave_only_by_nothing() -> None:
    for event in Event:
        for state in jobtable.ENDED:
            assert not jobtable.allows(event, state)


def test_only_failures_spend_an_attempt() -> None:
    spending = {e for e, row in jobtable.TABLE.items() if row.spends_attempt}
    assert spending == {Event.FAILED, Event.FAILED_LAST, Event.CHECKS_LAST}


@pytest.mark.parametrize(
    "outcome, failures, attempts, checks, to, want",
    [
        ("interrupted", 0, 3, False, None, Event.INTERRUPTED),
        ("interrupted", 2, 3, True, None, Event.INTERRUPTED),  # never spends
        ("failed", 0, 3, False, None, Event.FAILED),
        ("failed", 1, 3, False, None, Event.FAILED),
        ("failed", 2, 3, False, None, Event.FAILED_LAST),
        ("failed", 2, 3, True, None, Event.CHECKS_LAST),
        ("failed", 0, 1, False, None, Event.FAILED_LAST),
        ("succeeded", 2, 3, False, None, Event.SUCCEEDED),
        ("succeeded", 0, 3, False, State.BLOCKED, Event.BROKEN),
    ],
)
def test_run_end(outcome, failures, attempts, checks, to, want) -> None:
    assert (
        jobtable.run_end(
            outcome, failures=failures, attempts=attempts, checks_failed=checks, succeeded_to=to
        )
        is want
    )


@given(st.lists(st.sampled_from(list(Event)), max_size=40))
def test_any_walk_stays_in_the_table(events: list[Event]) -> None:
    state = State.PENDING
    for event in events:
        if jobtable.allows(event, state):
            state = jobtable.after(event, state)
        assert state in State


def test_killed_is_one_rule() -> None:
    assert shown_outcome("interrupted", "sigkill") == "killed"
    assert shown_outcome("failed", "sigkill") == "failed"  # a timeout killed
    assert shown_outcome("interrupted", "sigterm") == "interrupted"
    assert shown_outcome(None, None) == "ended"


def test_a_runs_word_is_the_same_on_the_page_and_in_the_cli() -> None:
    from owl.cli.jobview import run_outcome
    from owl.review.runs_html import outcome_badge

    rows = [
        {"outcome": "interrupted", "ended_by": "sigkill", "state": "ended"},
        {"outcome": "failed", "ended_by": "sigkill", "state": "ended", "exit_code": -9},
        {"outcome": "interrupted", "ended_by": "sigterm", "state": "ended"},
        {"outcome": "succeeded", "ended_by": "exit", "state": "ended"},
        {"outcome": None, "ended_by": None, "state": "frozen"},
        {"outcome": None, "ended_by": None, "state": None},
    ]
    words = [shown_run_outcome(r) for r in rows]
    assert words == ["killed", "failed", "interrupted", "succeeded", "frozen", "?"]
    for r, word in zip(rows, words):
        assert f">{word}</span>" in outcome_badge(r)
        assert run_outcome(r).startswith(word)


def test_store_records_what_the_table_decides(tmp_path) -> None:
    store = Store(tmp_path / "owl.db")
    job = store.add_job("a prompt", str(tmp_path), "claude", 2)
    run = store.start_run(job)
    assert store.job(job)["state"] == A
    assert store.finish_run(run, "failed", "exit", "exit 1", 1) == P
    assert store.job(job)["failures"] == 1
    run = store.start_run(job)
    assert (
        store.finish_run(run, "failed", "exit", "checks", 1, spent=("blocked", "its checks failed"))
        == B
    )
    assert store.job(job)["reason"] == "its checks failed"
    assert store.apply(job, Event.REPLY, reason=None) == P
    with pytest.raises(jobtable.NotAllowed):
        store.apply(job, Event.ACCEPT)
    assert store.job(job)["state"] == P  # a refused event changes nothing
    run = store.start_run(job)
    assert store.finish_run(run, "interrupted", "sigterm", None, 143) == P
    assert store.job(job)["failures"] == 2  # interrupted spent nothing
    run = store.start_run(job)
    assert store.finish_run(run, "succeeded", "exit", None, 0) == R
    assert store.apply(job, Event.ACCEPT, worktree=None) == D
