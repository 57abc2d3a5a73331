"""Whatever an agent prints, Owl's readers and rules take it without raising, and
every wait it can set is bounded by limits.max_wait.

Hypothesis throws arbitrary lines and arbitrary JSON values (in every field the
stream readers look at) at claude's stream reader, a command agent's limit
words and `jobrules`; then the cases that once took the engine down are named
one by one.
"""

from __future__ import annotations

import json
import math
from datetime import timezone

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from owl.agents import CommandDriver
from owl.agents.claude_stream import is_session_id, read_report, session_in
from owl.agents.resets import reset_time, reset_words
from owl.rules import budget, jobrules, timefmt
from owl.rules.jobrules import MAX_WAIT, Report, Verdict, judge

NOW = 1_796_100_000.0  # 2026-12-01
UTC = timezone.utc
SID = "73478951-e771-47a1-9513-56f941dedf25"

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e18, 1e308, -1, 0, 2**63, 10**30]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=60))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = (
    "type",
    "subtype",
    "session_id",
    "rate_limit_info",
    "status",
    "resetsAt",
    "rateLimitType",
    "error",
    "api_error",
    "api_error_status",
    "api_error_type",
    "api_error_params",
    "message",
    "content",
    "text",
    "result",
    "errors",
    "is_error",
    "num_turns",
    "usage",
    "duration_ms",
    "total_cost_usd",
    "input_tokens",
)
TYPES = ("system", "rate_limit_event", "assistant", "result", "user")


@st.composite
def events(draw) -> str:
    """A stream line shaped like claude's, with anything in its fields."""
    event = {k: draw(values) for k in draw(st.lists(st.sampled_from(KEYS), max_size=8))}
    event["type"] = draw(st.sampled_from(TYPES) | values)
    if draw(st.booleans()):
        event["subtype"] = "init"
    if draw(st.booleans()):
        event["rate_limit_info"] = {
            "status": "rejected",
            "resetsAt": draw(values),
            "rateLimitType": draw(values),
        }
    if draw(st.booleans()):
        event["error"] = draw(st.sampled_from(["rate_limit", "server_error"]) | values)
    try:
        return json.dumps(event)
    except (ValueError, TypeError):
        return "{}"


limit_words = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda n, u: f"usage limit, try again in {n} {u}",
        st.integers(min_value=0, max_value=10**60).map(str) | st.text("0123456789", max_size=400),
        st.sampled_from(["days", "hours", "minutes", "s", "d"]),
    ),
    st.builds(
        lambda mon, d, y, h, ap, z: f"usage limit · resets {mon} {d}, {y} at {h}{ap} ({z})",
        st.sampled_from(["Jan", "Feb", "Dec", "Foo"]),
        st.integers(0, 99),
        st.integers(0, 9999),
        st.integers(0, 99),
        st.sampled_from(["am", "pm", ""]),
        st.sampled_from(["UTC", "Europe/Paris", "Mars/Olympus", "../../etc"]),
    ),
    st.builds(lambda n: f"Claude AI usage limit reached|{n}", st.integers(0, 10**12)),
)


def fuzzed(examples: int) -> settings:
    """Hypothesis settings for feeding a reader arbitrary output: `examples`
    cases, and no deadline or slowness check, which a loaded machine would
    fail for reasons of its own."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


def judged(
    report: Report,
    *,
    agent: str = "claude",
    outcome: str = "failed",
    strikes: int = 0,
    now: float = NOW,
    max_wait: float = MAX_WAIT,
) -> Verdict:
    """What `jobrules` makes of a Run of `agent` that exited 1 and left `report`."""
    return judge(
        agent=agent,
        outcome=outcome,
        ended_by="exit",
        exit_code=1,
        reason="x",
        report=report,
        strikes=strikes,
        now=now,
        tz=UTC,
        max_wait=max_wait,
    )


def assert_wait_bounded(v: Verdict, now: float, longest: float) -> None:
    """A wait the verdict sets ends after `now` and no more than `longest` past it."""
    if v.wait is not None:
        assert now < v.wait.until <= now + longest


def check_report(r: Report) -> None:
    """What a reader made of hostile output is well formed, and bounded once judged."""
    assert r.session_id is None or is_session_id(r.session_id)
    for key, v in (r.usage or {}).items():
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), key
    json.dumps(r.usage)
    v = judged(r)
    assert_wait_bounded(v, NOW, MAX_WAIT)
    assert v.wait is None or "\n" not in v.reason


def command_agent(limit_pattern: str) -> CommandDriver:
    """A command agent (named codex) whose limit is any line matching `limit_pattern`."""
    return CommandDriver("codex", {"command": ["codex"], "limit_pattern": limit_pattern})


@fuzzed(400)
@given(st.lists(events() | st.text(max_size=300), max_size=12), st.booleans())
def test_claudes_stream_reader_takes_any_line_and_bounds_what_it_sets(lines, resuming):
    check_report(read_report(lines, resuming=resuming, now=NOW))
    sid = session_in(lines)
    assert sid is None or is_session_id(sid)


@fuzzed(400)
@given(limit_words, st.sampled_from([NOW, 0.0, 1e12]))
def test_the_reset_words_of_any_line_never_raise(text, now):
    got = reset_time(text, now)
    assert got is None or isinstance(got, float)
    said = reset_words(text)
    assert said is None or len(said) <= 160
    check_report(command_agent("(?i)limit").report(["working", text], 1, resuming=False, now=NOW))


@fuzzed(300)
@given(
    resets=numbers | st.none(),
    said=st.none() | st.text(max_size=80),
    strikes=st.integers(0, 10**6),
    now=st.floats(0, 4e9),
    max_wait=st.floats(1, 31 * 86400),
    kind=st.text(max_size=30) | st.none(),
    outcome=st.sampled_from(["failed", "interrupted", "succeeded"]),
)
def test_jobrules_bounds_every_wait_whatever_it_is_given(
    resets, said, strikes, now, max_wait, kind, outcome
):
    rep = Report(limit=kind, resets_at=resets, reset_said=said)
    v = judged(rep, outcome=outcome, strikes=strikes, now=now, max_wait=max_wait)
    assert_wait_bounded(v, now, max(max_wait, jobrules.BACKOFF_MAX))
    jobrules.at_words(resets if isinstance(resets, float) else 0.0, now, UTC)


# ------------------------------------------ the cases that once stopped the engine

# "try again in 3000000 days" from a command agent
DAYS_AWAY = command_agent("usage limit").report(
    ["usage limit, try again in 3000000 days"], 1, resuming=False, now=NOW
)
# claude's resetsAt 1e18
FAR_RESET = read_report(
    [
        json.dumps(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": 1e18,
                    "rateLimitType": "five_hour",
                },
            }
        )
    ],
    now=NOW,
)
WEEK_AWAY = Report(limit="seven_day", resets_at=NOW + 7 * 86400)


def test_an_absurd_reset_is_read_as_the_agent_said_it():
    assert DAYS_AWAY.resets_at == NOW + 3000000 * 86400
    assert DAYS_AWAY.reset_said == "try again in 3000000 days"
    assert (FAR_RESET.limit, FAR_RESET.resets_at, FAR_RESET.reset_said) == (
        "five_hour",
        1e18,
        "resetsAt 1e+18",
    )


@pytest.mark.parametrize(
    ("agent", "report", "max_wait", "until", "reason"),
    [
        # read, not used, said
        (
            "codex",
            DAYS_AWAY,
            MAX_WAIT,
            NOW + 300,
            'codex\'s usage limit; the reset it gave, "try again in 3000000 days", '
            "is more than 8 days away: trying again at 04:45",
        ),
        (
            "claude",
            FAR_RESET,
            MAX_WAIT,
            NOW + 300,
            'Claude\'s 5-hour usage limit; the reset it gave, "resetsAt 1e+18", '
            "is more than 8 days away: trying again at 04:45",
        ),
        # a limit within the bound is used as given
        (
            "claude",
            WEEK_AWAY,
            MAX_WAIT,
            NOW + 7 * 86400,
            "Claude's weekly usage limit; resets on Dec 8 2026 at 04:40",
        ),
        # and limits.max_wait says how far that is
        (
            "claude",
            WEEK_AWAY,
            86400,
            NOW + 300,
            'Claude\'s weekly usage limit; the reset it gave, "1796704800.0", '
            "is more than 1 day away: trying again at 04:45",
        ),
    ],
    ids=["days-away", "resets-at-1e18", "within-max-wait", "past-a-smaller-max-wait"],
)
def test_a_reset_past_max_wait_is_a_backoff_and_one_within_it_is_waited_for(
    agent, report, max_wait, until, reason
):
    v = judged(report, agent=agent, max_wait=max_wait)
    assert v.wait is not None and v.wait.until == until
    assert v.reason == reason


@pytest.mark.parametrize(
    ("moment", "words"),
    [
        (1e18, "at a moment that cannot be shown"),  # a moment past the calendar
        (NOW + 7 * 86400, "on Dec 8 2026 at 04:40"),  # within the bound, over six days off
        (NOW + 2 * 86400, "on Dec 3 at 04:40"),
        (NOW + 3600, "at 05:40"),  # today
        (NOW + 20 * 3600, "on Dec 2 at 00:40"),  # past midnight: its day, as owl status says it
    ],
)
def test_a_reset_moment_is_said_whatever_it_is(moment, words):
    assert jobrules.at_words(moment, NOW, UTC) == words
    if moment < 1e12:  # the same day and time as the status's lines and a window's reset
        shown = timefmt.ahead(moment, NOW, UTC)
        assert words.endswith(shown.rpartition(" ")[2]) and budget.clock(moment, NOW, UTC) == shown
        assert (words.startswith("on ") and shown.startswith("Dec")) or words == f"at {shown}"


def test_deep_nesting_odd_types_and_huge_numbers_in_the_stream_are_skipped():
    deep = '{"type":"result","error":' + "[" * 100_000 + "]" * 100_000 + "}"
    odd = [
        deep,
        '{"type":"assistant","error":"rate_limit","message":"not a dict"}',
        '{"type":"assistant","error":"x","message":{"content":5}}',
        '{"type":"result","is_error":true,"errors":5,"result":"x"}',
        '{"type":"result","num_turns":' + "9" * 4000 + "}",
        '{"type":"result","usage":{"input_tokens":1e308},"duration_ms":Infinity,'
        '"total_cost_usd":NaN}',
    ]
    r = read_report(odd, resuming=True, now=NOW)
    assert r.usage["duration_ms"] is None and r.usage["total_cost_usd"] is None
    assert r.usage["input_tokens"] is None


def test_only_the_first_well_formed_session_id_is_the_runs():
    init = lambda sid: json.dumps({"type": "system", "subtype": "init", "session_id": sid})  # noqa: E731
    result = lambda sid: json.dumps({"type": "result", "session_id": sid, "result": "ok"})  # noqa: E731
    other = "11111111-2222-3333-4444-555555555555"
    r = read_report([init("--help"), init(SID), result(other)], now=NOW)
    assert r.session_id == SID
    assert r.sessions_ignored == ("--help", other)
    assert session_in([init("--help")]) is None
    assert session_in([init(SID.upper())]) is None
    assert session_in([init(SID), init(other)]) == SID
    assert read_report([init(["x"])], now=NOW).session_id is None


def test_a_session_id_reaches_resume_only_in_claudes_shape_and_joined_to_its_option(tmp_path):
    from owl.agents import ClaudeDriver, RunContext

    driver = ClaudeDriver({"path": "claude"})

    def tail(sid):
        ctx = RunContext(
            job_id=1,
            run_id=2,
            attempt=2,
            job_prompt="do it",
            worktree=tmp_path,
            branch="owl/job-1",
            base="0" * 40,
            resume=sid,
            message="carry on",
        )
        return driver.tail(ctx)

    assert tail(SID) == [f"--resume={SID}", "--", "carry on"]
    for bad in ("--help", "-p", SID + "\n", SID.upper(), "x" * 36, "", "../" + SID):
        got = tail(bad)
        assert got[0] == "--" and not any(a.startswith("--resume") for a in got), bad
        assert "do it" in got[-1]
