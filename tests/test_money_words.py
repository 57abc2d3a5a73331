"""Money said honestly: on a subscription a cost is the API-equivalent, not a bill.

How the agent is signed in is read from what it says (Claude Code's
`apiKeySource`, in streams the real CLI wrote: `ANTHROPIC_API_KEY` on a key,
"none" on its OAuth sign-in); then `owl status`, the briefing, the phone's
notice, the review page and the money caps' own words say which. Pure parts,
with a fake clock; `test_budget_claude` runs both kinds through a real daemon.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from owl.agents import claude_stream
from owl.cli.carry import budget_facts, usage_text
from owl.engine.budgeting import spent_of
from owl.notify import events as ev
from owl.notify.briefing import Spell, spent, summary, view
from owl.notify.route import Router, Rules
from owl.review.runs_html import runs_section
from owl.review.text import usage_from_log
from owl.rules import budget, money
from owl.rules.budget import Caps, Spent
from owl.verbs.views import usage_sum

STREAMS = Path(__file__).parent / "support" / "streams"
T0 = 1_800_000_000.0
NOT_BILLED = "API-equivalent, not billed"


def report(name: str) -> claude_stream.Report:
    return claude_stream.read_report((STREAMS / name).read_text().splitlines(), now=T0)


def test_claudes_own_word_on_its_sign_in_is_recorded_with_the_runs_usage():
    key = report("success.jsonl")  # run on ANTHROPIC_API_KEY
    assert key.usage is not None and key.usage["billed"] is True
    oauth = report("claude-checkpoint.jsonl")  # run on CLAUDE_CODE_OAUTH_TOKEN
    assert oauth.usage is not None and oauth.usage["billed"] is False
    assert oauth.usage["total_cost_usd"] > 0  # the CLI counts a cost all the same
    # the review page's reading of a Run's log, where no usage was recorded
    assert usage_from_log((STREAMS / "success.jsonl").read_text())["billed"] is True
    assert usage_from_log((STREAMS / "claude-checkpoint.jsonl").read_text())["billed"] is False
    # a stream without its init (a resume that failed early) says nothing either way
    lines = (STREAMS / "success.jsonl").read_text().splitlines()
    unsaid = claude_stream.read_report([ln for ln in lines if '"init"' not in ln], now=T0)
    assert unsaid.usage is not None and "billed" not in unsaid.usage


def test_the_days_total_is_split_into_the_bill_and_the_api_equivalent():
    key = spent_of({"total_cost_usd": 1.0, "billed": True, "output_tokens": 10})
    sub = spent_of({"total_cost_usd": 2.0, "billed": False})
    unsaid = spent_of({"total_cost_usd": 0.5})
    assert (key.billed, key.unbilled, sub.billed, sub.unbilled) == (1.0, 0.0, 0.0, 2.0)
    day = key.plus(sub).plus(unsaid)
    assert (day.usd, day.billed, day.unbilled, day.tokens) == (3.5, 1.0, 2.0, 10)
    assert money.total_kind(day.usd, day.billed, day.unbilled) == money.MIXED
    assert money.total_kind(sub.usd, sub.billed, sub.unbilled) == money.EQUIVALENT
    assert money.total_kind(key.usd, key.billed, key.unbilled) == money.BILLED
    assert money.total_kind(unsaid.usd, unsaid.billed, unsaid.unbilled) == money.UNSAID
    assert money.total_kind(0.0, 0.0, 0.0) is None
    # a tiny subscription figure is still all API-equivalent, float sums or not
    tiny = Spent(0.1 + 0.2, 0, 0.0, 0.3)
    assert money.total_billed(tiny.usd, tiny.billed, tiny.unbilled) is False


@pytest.mark.parametrize(
    "unbilled, words",
    [
        (0.0, "today $1.84 of $5.00 · 12,345 tokens"),
        (1.84, f"today $1.84 of $5.00, {NOT_BILLED} · 12,345 tokens"),
        (1.0, f"today $1.84 of $5.00, $1.00 of it {NOT_BILLED} · 12,345 tokens"),
    ],
)
def test_owl_status_says_whether_the_days_dollars_are_a_bill(unbilled, words):
    b = {
        "today": {"usd": 1.84, "api_equivalent_usd": unbilled, "tokens": 12345},
        "caps": {"daily_usd": 5.0},
        "held": None,
        "spend": False,
    }
    assert budget_facts(b)[0] == ("budget", words)


def test_the_daily_and_run_caps_say_they_limit_the_api_equivalent_on_a_subscription():
    caps = Caps(daily_usd=5.0, run_usd=2.0)
    hold = budget.day_hold(Spent(5.12, 0, 0.0, 5.12), caps, T0)
    assert hold is not None and hold.reason == (
        f"today's $5.12 ({NOT_BILLED}) reached budget.daily_usd ($5.00); work goes on at midnight"
    )
    billed = budget.day_hold(Spent(5.12, 0, 5.12, 0.0), caps, T0)
    assert billed is not None and billed.reason.startswith("today's $5.12 reached")
    assert budget.run_over(Spent(2.5, 0, 0.0, 2.5), caps) == (
        f"the Run cost $2.50 ({NOT_BILLED}), over budget.run_usd ($2.00)"
    )
    assert budget.run_over(Spent(2.5, 0, 2.5, 0.0), caps) == (
        "the Run cost $2.50, over budget.run_usd ($2.00)"
    )


def ended(job: int, cost: float, billed: bool | None) -> ev.Stamp:
    return ev.Stamp(
        ev.RunEnded(job, job * 10, "review", f"job {job}", cost=cost, billed=billed), T0
    )


def briefing_of(*runs: tuple[float, bool | None]) -> Spell:
    spell = Spell(since=T0 - 3600)
    for i, (cost, billed) in enumerate(runs):
        spell.add(ended(i + 1, cost, billed).event)
    return spell


def test_the_briefing_says_a_subscriptions_night_was_not_billed():
    sub = briefing_of((0.5, False), (1.34, False))
    assert spent(sub) == f"2 Jobs ran · $1.84 ({NOT_BILLED})"
    assert f"· $1.84 ({NOT_BILLED})" in summary(sub, T0)
    doc = view(sub, T0, ended=T0)
    assert (doc["cost_usd"], doc["cost_kind"], doc["billed"]) == (1.84, "api-equivalent", False)
    key = briefing_of((0.5, True), (1.34, True))
    assert spent(key) == "2 Jobs ran · $1.84"
    assert (view(key, T0, ended=T0)["cost_kind"], view(key, T0, ended=T0)["billed"]) == (
        "billed",
        True,
    )
    both = briefing_of((0.5, True), (1.34, False))
    assert spent(both) == f"2 Jobs ran · $1.84 ($1.34 of it {NOT_BILLED})"
    assert view(both, T0, ended=T0)["cost_kind"] == "mixed"


def test_the_phones_review_notice_says_it_too():
    r = Router(Rules(batch=0))
    r.presence(True, T0 - 10)  # away
    r.event(ended(7, 0.42, False))
    [m] = r.tick(T0 + 1, 12 * 60)
    assert f"$0.42 ({NOT_BILLED})" in m.body.splitlines()
    r.event(ended(8, 0.42, True))
    [m] = r.tick(T0 + 2, 12 * 60)
    assert "$0.42" in m.body.splitlines()


def test_a_runs_and_a_jobs_cost_say_it_in_jobs_show_and_on_the_review_page():
    sub = {"num_turns": 2, "total_cost_usd": 0.0123, "billed": False}
    key = {"num_turns": 2, "total_cost_usd": 0.0123, "billed": True}
    assert usage_text(sub) == f"2 turns, $0.0123 ({NOT_BILLED})"
    assert usage_text(key) == "2 turns, $0.0123"
    both = usage_sum([sub, sub])
    assert both is not None and both["billed"] is False
    assert usage_text(both) == f"4 turns, $0.0246 ({NOT_BILLED})"
    mixed = usage_sum([sub, key])
    assert mixed is not None and mixed["billed"] is None
    run = {
        "id": 1,
        "attempt": 1,
        "outcome": "succeeded",
        "reason": None,
        "usage": sub,
        "started_at": T0,
        "ended_at": T0 + 60,
        "duration_s": 60.0,
        "exit_code": 0,
        "log_path": None,
        "agent": "claude",
    }
    assert f"$0.0123 ({NOT_BILLED})" in runs_section({"runs": [run]})


def test_owl_agents_says_a_subscriptions_cost_today_is_not_billed():
    from owl.cli.agents import row_text

    row = {
        "name": "claude",
        "default": True,
        "found": True,
        "path": "/usr/bin/claude",
        "problem": None,
        "version": "2.1.332",
        "waits": False,
        "runs_today": 2,
        "tokens_today": 0,
        "cost_today_usd": 1.84,
        "api_equivalent_today_usd": 1.84,
    }
    assert row_text(row).endswith(f"2 Runs today, $1.84 ({NOT_BILLED})")
    row["api_equivalent_today_usd"] = 0.0
    assert row_text(row).endswith("2 Runs today, $1.84")
