"""The budget's pure rule: which Runs may start, given the readings, the caps,
the person's presence and the clock; the words it says; the readings it refuses."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owl.agents.claude_stream import read_report, windows_in
from owl.rules import budget
from owl.rules.budget import FIVE_HOUR, SEVEN_DAY, Caps, Reading, Spent
from owl.settings import config as configmod

UTC = timezone.utc
NOW = datetime(2026, 12, 3, 19, 0, tzinfo=UTC).timestamp()

shares = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
useds = st.floats(min_value=0.0, max_value=1.5, allow_nan=False)
ahead_s = st.floats(min_value=1.0, max_value=8 * 86400.0, allow_nan=False)
windows = st.sampled_from([FIVE_HOUR, SEVEN_DAY])


def reading(window: str, used: float, in_s: float, seen: float = NOW) -> Reading:
    return Reading(window, used, NOW + in_s, seen)


@st.composite
def caps(draw: st.DrawFn) -> Caps:
    return Caps(
        keep_five_hour=draw(shares),
        keep_seven_day=draw(shares),
        daily_usd=draw(st.none() | st.floats(min_value=0.01, max_value=100.0)),
        daily_tokens=draw(st.none() | st.integers(min_value=1, max_value=10**9)),
    )


@settings(max_examples=300, deadline=None)
@given(caps(), st.lists(st.tuples(windows, useds, ahead_s), max_size=4), useds)
def test_a_run_starts_only_when_every_window_is_under_its_line(c, raw, _):
    rs = [reading(w, u, s) for w, u, s in raw]
    ok, why = budget.may_start("claude", {"claude": rs}, c, Spent(), NOW, present=False)
    latest = budget.latest(rs)
    under = all(r.used < c.line(r.window) - 1e-9 for r in latest.values())
    assert ok == under
    if not ok:
        assert why is not None and why.startswith("claude: keeping ")
        hold = budget.window_hold("claude", rs, c, NOW)
        assert hold is not None
        # held until the last of the windows over their lines resets
        assert hold.until == max(
            r.resets_at for r in latest.values() if budget.over_line(r, c, NOW)
        )


@settings(max_examples=200, deadline=None)
@given(caps(), st.lists(st.tuples(windows, useds, ahead_s), max_size=4))
def test_nothing_starts_while_the_person_is_present_and_a_spending_shift_ignores_headroom(c, raw):
    rs = {"claude": [reading(w, u, s) for w, u, s in raw]}
    assert budget.may_start("claude", rs, c, Spent(), NOW, present=True)[0] is False
    ok, _ = budget.may_start("claude", rs, c, Spent(), NOW, present=False, spend=True)
    assert ok is True or budget.day_hold(Spent(), c, NOW) is not None


@settings(max_examples=200, deadline=None)
@given(caps(), st.lists(st.tuples(windows, useds, ahead_s), min_size=1, max_size=4))
def test_after_every_reset_the_old_readings_hold_nothing(c, raw):
    rs = [reading(w, u, s) for w, u, s in raw]
    later = max(r.resets_at for r in rs)
    assert budget.window_hold("claude", rs, c, later) is None
    assert budget.may_start("claude", {"claude": rs}, c, Spent(), later, present=False)[0]


@settings(max_examples=200, deadline=None)
@given(caps(), st.floats(min_value=0, max_value=200), st.integers(min_value=0, max_value=2 * 10**9))
def test_the_day_holds_the_queue_from_its_cap_until_midnight(c, usd, tokens):
    tz = ZoneInfo("Europe/Paris")
    hold = budget.day_hold(Spent(usd, tokens), c, NOW, tz)
    over = (c.daily_usd is not None and usd >= c.daily_usd) or (
        c.daily_tokens is not None and tokens >= c.daily_tokens
    )
    assert (hold is not None) == over
    ok, _ = budget.may_start("claude", {}, c, Spent(usd, tokens), NOW, present=False)
    assert ok == (not over)
    if hold is not None:
        turns = datetime.fromtimestamp(hold.until, tz)
        assert (turns.hour, turns.minute) == (0, 0) and hold.until > NOW
        assert hold.until - NOW <= 86400 + 3600
        assert hold.agent is None and "work goes on at midnight" in hold.reason


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True))
def test_a_reading_out_of_sane_bounds_is_refused(used, reset):
    r = Reading(FIVE_HOUR, used, reset, NOW)
    sane = (
        math.isfinite(used)
        and 0 <= used <= 1.5
        and math.isfinite(reset)
        and NOW < reset <= NOW + 8 * 86400
    )
    assert (budget.insane(r, NOW) is None) == sane


@pytest.mark.parametrize("cost", [-0.01, math.nan, math.inf, "1.5", True, 1e9])
def test_a_cost_out_of_bounds_is_refused(cost):
    assert budget.cost_insane(cost) is not None


def test_the_words_name_the_agent_the_window_what_is_used_and_the_reset():
    tz = ZoneInfo("Europe/London")
    reset = datetime(2026, 12, 3, 21, 40, tzinfo=tz).timestamp()
    r = Reading(FIVE_HOUR, 0.85, reset, NOW)
    hold = budget.window_hold("claude", [r], Caps(), NOW, tz)
    assert hold is not None and hold.kind == "budget:five_hour"
    assert hold.reason == (
        "claude: keeping 20% of your five-hour window for you — 85% used, resets 21:40"
    )
    week = Reading(SEVEN_DAY, 0.71, NOW + 3 * 86400, NOW)
    hold = budget.window_hold("claude", [week], Caps(), NOW, tz)
    assert hold is not None
    assert hold.reason.startswith("claude: keeping 30% of your seven-day window for you — 71% used")
    assert "Dec 6" in hold.reason
    # at the line exactly: held; a hair under: not
    assert budget.window_hold("c", [Reading(FIVE_HOUR, 0.80, NOW + 60, NOW)], Caps(), NOW)
    assert not budget.window_hold("c", [Reading(FIVE_HOUR, 0.799, NOW + 60, NOW)], Caps(), NOW)


def test_the_newest_reading_of_a_window_is_the_one_that_counts():
    old = Reading(FIVE_HOUR, 0.9, NOW + 600, NOW - 100)
    new = Reading(FIVE_HOUR, 0.1, NOW + 18000, NOW)
    assert budget.window_hold("claude", [old, new], Caps(), NOW) is None
    assert budget.window_hold("claude", [new, old], Caps(), NOW) is None


def test_a_run_over_its_own_cap_failed_its_bound():
    assert budget.run_over(Spent(2.5, 0), Caps(run_usd=2.0)) == (
        "the Run cost $2.50, over budget.run_usd ($2.00)"
    )
    assert budget.run_over(Spent(0, 600_000), Caps(run_tokens=500_000)) == (
        "the Run used 600,000 tokens, over budget.run_tokens (500,000)"
    )
    assert budget.run_over(Spent(2.0, 500_000), Caps(run_usd=2.0, run_tokens=500_000)) is None


def test_the_night_is_said_window_by_window():
    first = {"claude five_hour": 0.40, "claude seven_day": 0.31}
    last = {"claude seven_day": 0.44, "claude five_hour": 0.78, "codex five_hour": 0.2}
    assert budget.night_words(first, last) == [
        "claude five-hour 40% → 78%, seven-day 31% → 44%",
        "codex five-hour 20% → 20%",
    ]


def test_claudes_windows_are_read_from_its_rate_limit_event():
    line = (
        '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","isUsingOverage":false,'
        '"unifiedWindows":{"five_hour":{"utilization":0.85,"resetsAt":1796503152,'
        '"status":"allowed_warning"},"seven_day":{"utilization":0.42,"resetsAt":1796758752,'
        '"status":"allowed"}}},"uuid":"63f625b4","session_id":"a0527cda"}'
    )
    assert windows_in(line, NOW) == [
        Reading(FIVE_HOUR, 0.85, 1796503152.0, NOW),
        Reading(SEVEN_DAY, 0.42, 1796758752.0, NOW),
    ]
    rep = read_report([line], now=NOW)
    assert rep.limit is None and len(rep.windows) == 2
    hostile = line.replace("0.85", '"lots"').replace("1796758752", "1e400")
    got = windows_in(hostile, NOW)
    assert all(budget.insane(r, NOW) is not None for r in got)
    assert windows_in('{"type":"assistant","text":"rate_limit_event"}', NOW) == []
    assert windows_in("not json rate_limit_event", NOW) == []


def test_the_budget_section_is_checked_where_it_is_read():
    cfg = configmod.from_dict(
        {
            "budget": {
                "keep_five_hour": "25%",
                "daily_usd": 5,
                "run_tokens": 1000,
                "finish_run": True,
            }
        }
    )
    assert cfg.budget == Caps(0.25, 0.30, 5.0, None, None, 1000, True)
    assert configmod.from_dict({}).budget == Caps(0.20, 0.30)
    for bad, words in [
        ({"keep_five_hour": 0.2}, 'budget.keep_five_hour = 0.2: must be a share from "0%"'),
        ({"keep_seven_day": "120%"}, "budget.keep_seven_day"),
        ({"daily_usd": -1}, "budget.daily_usd = -1: must be more than 0"),
        ({"run_usd": "5"}, "must be a number of dollars"),
        ({"daily_tokens": 1.5}, "must be a whole number of tokens"),
        ({"spend": True}, "unknown key budget.spend"),
    ]:
        with pytest.raises(configmod.ConfigError, match=words.replace("(", r"\(")):
            configmod.from_dict({"budget": bad})
    shown = configmod.effective_document(cfg)["budget"]
    assert shown == {
        "keep_five_hour": "25%",
        "keep_seven_day": "30%",
        "finish_run": True,
        "daily_usd": 5.0,
        "run_tokens": 1000,
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_the_window_readers_take_any_value_and_only_readings_come_out(info, windows_value):
    import json as jsonmod

    from owl.agents import codex_rollout

    event = {"type": "rate_limit_event", "rate_limit_info": info}
    if isinstance(info, dict):
        info["unifiedWindows"] = windows_value
    for r in windows_in(jsonmod.dumps(event), NOW):
        assert isinstance(r, Reading) and r.window in (FIVE_HOUR, SEVEN_DAY)
    limits = {"primary": info, "secondary": windows_value}
    for r in codex_rollout._readings(limits, NOW):
        assert isinstance(r, Reading) and r.window in (FIVE_HOUR, SEVEN_DAY)


def test_codexs_rollout_is_read_as_data_and_a_link_is_not_followed(tmp_path):
    from owl.agents import codex_rollout

    thread = "01a247b8-a71f-7b52-8319-54b16d68f57b"
    day = tmp_path / "sessions" / "2026" / "12" / "05"
    day.mkdir(parents=True)
    line = (
        '{"type":"event_msg","payload":{"type":"token_count","rate_limits":{"primary":'
        '{"used_percent":85.0,"window_minutes":300,"resets_at":1796503211},"secondary":'
        '{"used_percent":42.0,"window_minutes":10080,"resets_at":1796758811}}}}'
    )
    rollout = day / f"rollout-2026-12-05T19-40-13-{thread}.jsonl"
    rollout.write_text("not json\n" + line + "\n")
    assert codex_rollout.windows(tmp_path, thread, NOW) == [
        Reading(FIVE_HOUR, 0.85, 1796503211.0, NOW),
        Reading(SEVEN_DAY, 0.42, 1796758811.0, NOW),
    ]
    assert codex_rollout.windows(tmp_path, "../../etc", NOW) == []
    secret = tmp_path / "secret.jsonl"
    rollout.rename(secret)
    rollout.symlink_to(secret)
    assert codex_rollout.windows(tmp_path, thread, NOW) == []


def test_what_each_agent_reports_is_what_the_caps_count():
    from owl.engine.budgeting import spent_of

    claude = {"input_tokens": 20, "output_tokens": 10, "total_cost_usd": 0.00014}
    codex = {"input_tokens": 200, "cache_read_input_tokens": 40, "output_tokens": 20}
    gemini = {"input_tokens": 300, "output_tokens": 7, "total_tokens": 307, "total_cost_usd": None}
    aider = {"input_tokens": 1200, "output_tokens": 80, "total_cost_usd": 0.02}
    assert spent_of(claude) == Spent(0.00014, 30)
    assert spent_of({**codex, "total_cost_usd": None}) == Spent(0.0, 220)
    assert spent_of(gemini) == Spent(0.0, 307)
    assert spent_of(aider) == Spent(0.02, 1280)
    # a cost or a count out of bounds counts nothing
    assert spent_of({"total_cost_usd": -5, "input_tokens": 1e300, "output_tokens": "9"}) == Spent()
    assert spent_of(None) == Spent()


def test_a_contained_runs_codex_home_is_read_where_owl_keeps_it():
    from pathlib import Path

    from owl.agents import codex_rollout

    kept = (
        ("/home/p/.cargo/registry", "/owl/sandbox/projects/x/caches/registry-1"),
        ("/home/p/.codex", "/owl/sandbox/projects/x/agents/codex-2/codex-3"),
        ("/home/p/.codex/log", "/owl/elsewhere"),
    )
    on_host = codex_rollout.on_host
    assert on_host(Path("/home/p/.codex"), kept) == Path(kept[1][1])
    assert on_host(Path("/home/p/.codex/sessions/2026"), kept) == Path(kept[1][1], "sessions/2026")
    assert on_host(Path("/home/p/.codex/log/a"), kept) == Path("/owl/elsewhere/a")  # the nearest
    # not under any (a name that only starts alike), or uncontained: as it is
    assert on_host(Path("/home/p/.codexx"), kept) == Path("/home/p/.codexx")
    assert on_host(Path("/home/p/.codex"), ()) == Path("/home/p/.codex")
