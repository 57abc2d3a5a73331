"""The rules for what a Run's end means for its Job, on a fake clock; and the
readers that give them their facts: claude's stream-json (lines captured from
the real CLI 2.1.332 in support/streams/) and the reset time in an agent's words."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from owl.rules import jobrules
from owl.agents import CommandDriver
from owl.agents.claude_stream import read_report, session_in
from owl.logspan import read_span
from owl.agents.resets import reset_time
from owl.engine.carryon import INSIDE_MARKERS, agent_env
from owl.rules.jobrules import Prior, Report, backoff, judge, plan

STREAMS = Path(__file__).parent / "support" / "streams"
UTC = timezone.utc


def at(text: str, tz=UTC) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


NOW = at("2026-12-01 09:00")


# ------------------------------------------------------------ reset words


@pytest.mark.parametrize(
    "text, now, expected",
    [
        ("Claude AI usage limit reached|1753441200", NOW, 1753441200.0),
        (
            "API Error: Request rejected (429) · Claude AI usage limit reached|1796112643",
            NOW,
            1796112643.0,
        ),
        # still to come today
        ("You've hit your 5-hour limit · resets 11:10am (UTC)", NOW, at("2026-12-01 11:10")),
        # the hour has passed: tomorrow
        ("You've hit your 5-hour limit · resets 8:10am (UTC)", NOW, at("2026-12-02 08:10")),
        ("You've hit your 5-hour limit · resets 9pm (UTC)", NOW, at("2026-12-01 21:00")),
        ("You've hit your 5-hour limit · resets 12am (UTC)", NOW, at("2026-12-02 00:00")),
        ("You've hit your 5-hour limit · resets 12pm (UTC)", NOW, at("2026-12-01 12:00")),
        # a zone of its own: 11:30 in Colombo (UTC+5:30) is 06:00 UTC, passed: tomorrow
        ("You're out of extra usage · resets 11:30am (Asia/Colombo)", NOW, at("2026-12-02 06:00")),
        ("You're out of extra usage · resets 11:30pm (Asia/Colombo)", NOW, at("2026-12-01 18:00")),
        # a date: Jul 15 has passed this year, so next year's; midnight in Melbourne (UTC+10 in July)
        (
            "You've hit your weekly limit · resets Jul 15 at 12am (Australia/Melbourne)",
            NOW,
            at("2027-07-14 14:00"),
        ),
        (
            "You've hit your weekly limit · resets Dec 3 at 5pm (Europe/Paris)",
            NOW,
            at("2026-12-03 16:00"),
        ),
        # other agents' words
        ("Rate limited: try again in 2 hours 5 minutes", NOW, NOW + 7500),
        ("quota exceeded, retry in 90s", NOW, NOW + 90),
    ],
)
def test_the_reset_time_in_every_form_the_cli_has_used(text, now, expected):
    assert reset_time(text, now) == expected


def test_a_time_without_a_zone_is_in_the_machines_zone_and_unreadable_words_give_none():
    paris = ZoneInfo("Europe/Paris")
    assert reset_time("resets 11am", NOW, local=paris) == at("2026-12-01 11:00", paris)
    for text in (
        "You've hit your 5-hour limit",
        "resets 13pm (UTC)",
        "resets 25:00 (UTC)",
        "",
        "resets 9:99am (UTC)",
        "API Error: 529 Overloaded",
        "resets Foo 3 at 1am (UTC)",
    ):
        assert reset_time(text, NOW) is None, text
    # an unknown zone name falls back to the machine's zone rather than failing
    assert reset_time("resets 11am (Mars/Olympus)", NOW, local=UTC) == at("2026-12-01 11:00")


# -------------------------------------------------------- claude's stream


def report(name: str, resuming: bool = False, now: float = NOW) -> Report:
    return read_report(read_span(STREAMS / f"{name}.jsonl"), resuming=resuming, now=now)


def test_a_subscriptions_usage_limit_in_the_stream():
    r = report("usage_limit")
    assert (r.limit, r.resets_at) == ("five_hour", 1796112643)
    assert r.session_id and r.last_message == "You've hit your 5-hour limit · resets 8:10am (UTC)"
    assert report("usage_limit_weekly").limit == "seven_day"


def test_an_api_keys_429_the_service_failing_and_an_ordinary_error_in_the_stream():
    r = report("api_key_429")
    assert (r.limit, r.resets_at, r.service_error) == ("rate_limit", None, None)
    assert report("api_key_429_text").resets_at == 1753441200.0
    r = report("overloaded_529")
    assert (r.limit, r.service_error) == (None, "HTTP 529 overloaded")
    r = report("connection_refused")
    assert (r.limit, r.service_error) == (None, "connection error")
    r = report("bad_request_400")
    assert (r.limit, r.service_error, r.resume_failed) == (None, None, None)


def test_a_successful_runs_session_usage_and_final_message():
    r = report("success")
    assert r.session_id == session_in(read_span(STREAMS / "success.jsonl"))
    assert r.last_message == "All done."
    assert r.usage is not None and r.usage["num_turns"] == 2
    assert set(r.usage) == {
        "duration_ms",
        "num_turns",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "total_cost_usd",
        "billed",
    }
    assert r.usage["input_tokens"] == 20 and r.usage["total_cost_usd"] > 0
    # success.jsonl ran on an API key: its cost is the bill
    assert r.usage["billed"] is True


def test_a_refused_resume_is_seen_only_when_resuming():
    r = report("no_conversation", resuming=True)
    assert r.resume_failed.startswith("No conversation found with session ID")
    assert r.session_id is None
    assert report("no_conversation").resume_failed is None


def test_allowed_rate_limit_events_are_not_limits_and_odd_lines_are_skipped():
    lines = [
        '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning",'
        '"resetsAt":1796112643,"rateLimitType":"five_hour"}}',
        '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}',
        "not json",
        "[1,2]",
        '{"type":"result","is_error":false,"result":"ok"}',
    ]
    r = read_report(lines, now=NOW)
    assert (r.limit, r.service_error, r.last_message) == (None, None, "ok")


def test_a_long_log_is_read_by_its_head_and_tail(tmp_path):
    log = tmp_path / "run.log"
    ok = (STREAMS / "usage_limit.jsonl").read_text().splitlines()
    filler = (
        '{"type":"assistant","message":{"content":[{"type":"text","text":"' + "x" * 500 + '"}]}}'
    )
    log.write_text("\n".join([ok[0]] + [filler] * 8000 + ok[1:]) + "\n")
    assert log.stat().st_size > 3 * 1024 * 1024
    r = read_report(read_span(log), now=NOW)
    assert r.session_id and r.limit == "five_hour"
    assert read_span(log, offset=10**9)  # rotated since: read from the start


# ----------------------------------------------------------------- rules


def judged(**kw) -> jobrules.Verdict:
    args = dict(
        agent="claude",
        outcome="failed",
        ended_by="exit",
        exit_code=1,
        reason="the agent exited with code 1",
        report=None,
        strikes=0,
        now=NOW,
        tz=UTC,
    )
    args.update(kw)
    return judge(**args)


@pytest.mark.parametrize(
    "rep, outcome, reason, until, strikes",
    [
        (
            Report(limit="five_hour", resets_at=at("2026-12-01 11:10")),
            "interrupted",
            "Claude's 5-hour usage limit; resets at 11:10",
            at("2026-12-01 11:10"),
            0,
        ),
        (
            Report(limit="seven_day", resets_at=at("2026-12-05 00:00")),
            "interrupted",
            "Claude's weekly usage limit; resets on Dec 5 at 00:00",
            at("2026-12-05 00:00"),
            0,
        ),
        # a reset already past is no reset: the backoff
        (
            Report(limit="five_hour", resets_at=NOW - 5),
            "interrupted",
            "Claude's 5-hour usage limit; no reset time given, trying again at 09:05",
            NOW + 300,
            1,
        ),
        (
            Report(limit="rate_limit"),
            "interrupted",
            "Claude's API rate limit (HTTP 429); no reset time given, trying again at 09:05",
            NOW + 300,
            1,
        ),
        (
            Report(service_error="HTTP 529 overloaded"),
            "interrupted",
            "Claude's model service failed (HTTP 529 overloaded); trying again at 09:05",
            NOW + 300,
            1,
        ),
        (
            Report(service_error="connection error"),
            "interrupted",
            "Claude's model service failed (connection error); trying again at 09:05",
            NOW + 300,
            1,
        ),
        (Report(), "failed", "the agent exited with code 1", None, None),
    ],
)
def test_what_the_end_of_a_run_means(rep, outcome, reason, until, strikes):
    v = judged(report=rep)
    assert (v.outcome, v.reason) == (outcome, reason)
    assert v.spends_attempt is (outcome == "failed")
    assert (v.wait.until if v.wait else None) == until
    assert (v.wait.strikes if v.wait else None) == strikes
    if v.wait:
        assert v.wait.agent == "claude" and v.wait.reason == reason


def test_the_backoff_doubles_from_five_minutes_to_an_hour():
    assert [backoff(n) for n in range(7)] == [300, 600, 1200, 2400, 3600, 3600, 3600]
    waits = []
    strikes = 0
    for _ in range(6):
        v = judged(report=Report(service_error="HTTP 500 api"), strikes=strikes)
        waits.append(v.wait.until - NOW)
        strikes = v.wait.strikes
    assert waits == [300, 600, 1200, 2400, 3600, 3600]


def test_only_the_agents_own_failing_exit_can_be_a_wait():
    limit = Report(limit="five_hour", resets_at=NOW + 60)
    # a check that failed after the agent exited 0
    assert judged(report=limit, exit_code=0, reason="check x failed").outcome == "failed"
    # a timeout ends the Run with SIGTERM: the agent's words do not excuse it
    v = judged(
        report=Report(service_error="HTTP 529 overloaded"),
        ended_by="sigterm",
        reason="ran longer than runs.timeout (4h)",
    )
    assert (v.outcome, v.wait) == ("failed", None)
    # an interrupted Run that had met a limit still sets the wait
    v = judged(report=limit, outcome="interrupted", ended_by="sigterm", reason="stopped")
    assert v.outcome == "interrupted" and v.wait.until == NOW + 60
    # success, or a failure of its own, starts the backoff over; an interruption does not
    assert judged(outcome="succeeded", exit_code=0, reason=None).clear
    assert judged().clear
    assert not judged(outcome="interrupted", ended_by="sigterm", reason="stopped").clear


def test_an_agent_that_exits_0_but_says_it_gave_up_did_not_succeed():
    gave_up = "litellm.RateLimitError: ... Please try again in 7m12s."
    ok = dict(outcome="succeeded", exit_code=0, reason=None, agent="aider")
    # aider ends a --message run with 0 after its retries: a limit is still a wait
    v = judged(report=Report(limit="rate_limit", resets_at=NOW + 432, gave_up=gave_up), **ok)
    assert v.outcome == "interrupted" and v.wait is not None and v.wait.until == NOW + 432
    assert v.reason == "aider's API rate limit (HTTP 429); resets at 09:07"
    v = judged(report=Report(service_error="connection error", gave_up="x"), **ok)
    assert v.outcome == "interrupted" and v.wait is not None and not v.spends_attempt
    # any other error it gave up on is a failure of its own, saying which
    v = judged(report=Report(gave_up="litellm.AuthenticationError: bad key"), **ok)
    assert (v.outcome, v.reason, v.wait) == (
        "failed",
        "aider gave up: litellm.AuthenticationError: bad key",
        None,
    )
    # the words of a limit it got past (no gave_up) change nothing
    assert judged(report=Report(limit="rate_limit"), **ok).outcome == "succeeded"
    # killed by Owl, it did not give up: as lifecycle said
    v = judged(report=Report(gave_up="x"), outcome="interrupted", ended_by="sigterm", reason="s")
    assert v.outcome == "interrupted"


def test_a_refused_resume_that_could_not_fall_back_spends_no_attempt():
    v = judged(report=Report(resume_failed="No conversation found with session ID: x"))
    assert v.outcome == "interrupted" and v.wait is None and "afresh" in v.reason


def test_a_command_agent_opts_in_with_its_pattern_and_exit_code():
    lines = ["working", "ERROR: You've hit your usage limit. Try again in 3 hours."]
    both = CommandDriver(
        "codex", {"command": ["codex"], "limit_pattern": "usage limit", "limit_exit_code": 1}
    )
    r = both.report(lines, 1, resuming=False, now=NOW)
    assert (r.limit, r.resets_at) == ("usage", NOW + 3 * 3600)
    assert both.report(lines, 2, resuming=False, now=NOW) == Report()  # other exit code
    assert both.report(["plain failure"], 1, resuming=False, now=NOW) == Report()
    assert both.report(lines, 0, resuming=False, now=NOW) == Report()  # it succeeded
    code_only = CommandDriver("x", {"command": ["x"], "limit_exit_code": 75})
    assert code_only.report([], 75, resuming=False, now=NOW).limit == "usage"
    assert (
        CommandDriver("y", {"command": ["y"]}).report(lines, 1, resuming=False, now=NOW) == Report()
    )
    v = judged(agent="codex", report=both.report(lines, 1, resuming=False, now=NOW))
    assert v.reason == "codex's usage limit; resets at 12:00"


# -------------------------------------------------------------- next Run


def test_how_the_next_run_begins():
    grace = Prior("interrupted", "the grace window passed while the machine was in use", "s1")
    p = plan(grace, [], can_resume=True, handoff="half done")
    assert p.resume == "s1"
    assert "grace window" in p.message and "half done" in p.message
    limit = Prior("interrupted", "Claude's 5-hour usage limit; resets at 11:10", "s1")
    assert "usage limit" in plan(limit, [], can_resume=True).message
    failed = Prior("failed", "check tests failed (exit 1)", "s2", "$ pytest\n1 failed")
    p = plan(failed, [], can_resume=True)
    assert p.resume == "s2" and "check tests failed" in p.message and "1 failed" in p.message
    review = Prior("succeeded", None, "s3")
    p = plan(review, ["add a goodbye file", "  "], can_resume=True)
    assert p.message.startswith("The person looked at your work and replied:\n\nadd a goodbye")
    assert p.replies == ("add a goodbye file",)
    # fresh: no session, resuming off (agents.claude.resume = false, a command agent)
    assert plan(Prior("interrupted", "x", None), [], can_resume=True).resume is None
    assert plan(grace, [], can_resume=False) == jobrules.Plan(None, None, ())
    assert plan(None, ["hi"], can_resume=True).resume is None


def test_claude_codes_inside_markers_are_not_passed_to_agents():
    base = {
        "PATH": "/bin",
        "CLAUDECODE": "1",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "CLAUDE_CODE_SSE_PORT": "1234",
        "CLAUDE_CONFIG_DIR": "/c",
        "HOME": "/h",
    }
    assert agent_env(base) == {"PATH": "/bin", "CLAUDE_CONFIG_DIR": "/c", "HOME": "/h"}
    assert {"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"} <= set(INSIDE_MARKERS)


def test_the_config_refuses_a_broken_limit_pattern_or_exit_code_in_one_line():
    from owl.settings import config

    ok = config.from_dict(
        {
            "agents": {
                "codex": {
                    "command": ["codex", "{prompt}"],
                    "limit_pattern": "usage limit",
                    "limit_exit_code": 2,
                },
                "claude": {"resume": False},
            }
        }
    )
    assert ok.agent("codex")["limit_exit_code"] == 2 and ok.agent("claude")["resume"] is False
    for bad, words in (
        ({"limit_pattern": "(unclosed"}, "not a regular expression"),
        ({"limit_exit_code": 0}, "from 1 to 255"),
        ({"limit_exit_code": 300}, "from 1 to 255"),
        ({"resume": "yes"}, "true or false"),
    ):
        with pytest.raises(config.ConfigError) as e:
            config.from_dict({"agents": {"codex": {"command": ["codex"], **bad}}})
        assert words in str(e.value) and "\n" not in str(e.value)


def test_a_turn_lost_at_a_thaw_is_carried_on_at_once_with_nothing_spent():
    now = 1_800_000_000.0
    rep = Report(service_error="connection error", session_id="s")

    def end(freeze):
        return judge(
            agent="codex",
            outcome="failed",
            ended_by="exit",
            exit_code=1,
            reason="exit 1",
            report=rep,
            strikes=2,
            now=now,
            freeze=freeze,
        )

    v = end((now - 400, now - 30))
    assert v.outcome == "interrupted" and v.wait is None and v.thaw_lost
    assert not v.spends_attempt
    assert "lost its turn when its Run was thawed after a freeze of 370 s" in (v.reason or "")
    # long after the thaw, still frozen, or never frozen: the service failing, a wait
    for freeze in ((now - 4000, now - jobrules.THAW_SPAN - 1), (now - 10, None), None):
        v = end(freeze)
        assert v.wait is not None and v.wait.kind == "service" and not v.thaw_lost
    # a failure that is not the service's stays a failure
    v = judge(
        agent="codex",
        outcome="failed",
        ended_by="exit",
        exit_code=1,
        reason="exit 1",
        report=Report(),
        strikes=0,
        now=now,
        freeze=(now - 400, now - 30),
    )
    assert v.outcome == "failed"


# ------------------------------------------------------------ setup problems


@pytest.mark.parametrize(
    "problem, hint",
    [
        ("missing environment variable X_API_KEY", 'sandbox.env_keep = ["X_API_KEY"]'),
        ("could not connect to 127.0.0.1:11434", "sandbox.host_ports = [11434]"),
        ("my-agent was not found", "check agents.codex.path or its command"),
    ],
)
def test_an_agent_that_cannot_start_for_its_setup_blocks_the_job_and_spends_nothing(problem, hint):
    v = judge(
        agent="codex",
        outcome="failed",
        ended_by="exit",
        exit_code=1,
        reason="the agent exited 1",
        report=Report(setup_problem=problem),
        strikes=0,
        now=NOW,
    )
    assert (v.outcome, v.block, v.spends_attempt, v.wait) == ("interrupted", True, False, None)
    assert v.reason is not None
    assert v.reason.startswith(f"codex could not start: {problem}; ") and hint in v.reason
    assert v.reason.endswith("then owl jobs extend")


def test_a_setup_problem_is_not_one_when_the_agent_succeeded_or_was_stopped():
    for outcome, ended_by, code in (("succeeded", "exit", 0), ("interrupted", "sigterm", -15)):
        v = judge(
            agent="codex",
            outcome=outcome,
            ended_by=ended_by,
            exit_code=code,
            reason=None,
            report=Report(setup_problem="missing environment variable X"),
            strikes=0,
            now=NOW,
        )
        assert not v.block and v.outcome == outcome
    # a usage limit the same Run met is a wait, as before
    v = judge(
        agent="codex",
        outcome="failed",
        ended_by="exit",
        exit_code=1,
        reason=None,
        report=Report(limit="usage", setup_problem="missing environment variable X"),
        strikes=0,
        now=NOW,
    )
    assert not v.block and v.wait is not None


def test_a_sandbox_failing_at_its_start_spends_nothing_and_blocks_the_second_time():
    words = "bwrap: Can't find source path /gone: No such file or directory"
    first = jobrules.sandbox_failed(words, None)
    assert (first.outcome, first.block, first.spends_attempt) == ("interrupted", False, False)
    assert first.reason == f"the sandbox could not be set up: {words}"
    other = jobrules.sandbox_failed(words, "the agent exited with code 1")
    assert not other.block
    again = jobrules.sandbox_failed(words, first.reason)
    assert again.block and not again.spends_attempt and "owl jobs extend" in again.reason
    # a different failure of bwrap's is a moment of its own, not a repeat
    assert not jobrules.sandbox_failed("bwrap: another", first.reason).block
