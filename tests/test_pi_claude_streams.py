"""pi's JSON lines and Claude's limit checkpoint, read from streams the REAL CLIs printed.

The streams under tests/support/streams were captured from pi 0.73.1 against
the Chat Completions stub (a Run that committed, one whose every request met
429 "Please try again in 7m12s.", one whose every request met 500) and from
Claude Code 2.1.332 against the Messages API stub answering with the five-hour
window at 96 % and `allowed_warning`. What each says is read here as the
driver reads it, and hostile lines never make a reader raise.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from owl.agents import RunContext, get_driver
from owl.agents.claude_stream import CHECKPOINT_AT
from owl.agents.claude_stream import read_report as claude_report
from owl.agents.pi import PiDriver
from owl.agents.pi_stream import read_report, session_in, status_of
from owl.agents.render import render_line
from owl.rules import jobrules
from owl.sandbox import agentconf, agentstate

STREAMS = Path(__file__).parent / "support" / "streams"
NOW = time.time()


def lines(name: str) -> list[str]:
    return (STREAMS / name).read_text().splitlines()


def ctx(tmp_path: Path, **kw) -> RunContext:
    return RunContext(1, 2, 1, "-v: add a hello file", tmp_path, "owl/job-1", "abc", **kw)


def test_a_run_that_committed_gives_its_session_usage_cost_and_last_words():
    rep = read_report(lines("pi-ok.jsonl"), 0, now=NOW)
    assert rep.session_id and len(rep.session_id) == 36
    assert session_in(lines("pi-ok.jsonl")) == rep.session_id
    assert rep.limit is None and rep.service_error is None and rep.gave_up is None
    assert rep.last_message == "Committed hello.txt."
    assert rep.usage is not None
    assert rep.usage["input_tokens"] == 2 * 1234 and rep.usage["output_tokens"] == 2 * 56
    assert abs(rep.usage["total_cost_usd"] - 2 * (1234e-6 + 56e-5)) < 1e-9


def test_a_429_after_pis_retries_is_a_limit_with_the_providers_reset():
    rep = read_report(lines("pi-limit.jsonl"), 0, now=NOW)
    assert rep.limit == "rate_limit" and rep.service_error is None
    assert rep.resets_at is not None and abs(rep.resets_at - (NOW + 432)) < 2
    assert rep.gave_up and rep.gave_up.startswith("429 Rate limit reached")
    # pi exits 0: the judge reads that it gave up, and waits for the reset
    v = jobrules.judge(
        agent="pi",
        outcome="succeeded",
        ended_by="exit",
        exit_code=0,
        reason=None,
        report=rep,
        strikes=0,
        now=NOW,
    )
    assert v.outcome == "interrupted" and not v.spends_attempt
    assert v.wait is not None and v.wait.until == rep.resets_at
    assert v.reason and v.reason.startswith("pi's API rate limit (HTTP 429); resets ")


def test_a_5xx_after_pis_retries_is_the_service_failing():
    rep = read_report(lines("pi-5xx.jsonl"), 0, now=NOW)
    assert rep.limit is None and rep.service_error == "HTTP 500"
    v = jobrules.judge(
        agent="pi",
        outcome="succeeded",
        ended_by="exit",
        exit_code=0,
        reason=None,
        report=rep,
        strikes=0,
        now=NOW,
    )
    assert v.outcome == "interrupted" and v.wait is not None and v.wait.kind == "service"


def test_the_status_is_read_from_the_head_of_the_error_only():
    assert status_of("429 Rate limit reached") == 429
    assert status_of("503 Service Unavailable") == 503
    assert status_of("Connection error.") is None
    assert status_of("the model said 429 times") is None


def test_the_log_shows_the_tool_call_its_output_and_the_turn_with_its_cost():
    shown = [s for s in map(render_line, lines("pi-ok.jsonl")) if s]
    text = "\n".join(shown)
    assert "● pi session " in text
    assert "→ bash: echo hello > hello.txt && echo committed" in text
    assert "← committed" in text
    assert "Committed hello.txt.\n✓ turn done (1.2k in, 56 out, $0.0018)" in text
    limited = "\n".join(s for s in map(render_line, lines("pi-limit.jsonl")) if s)
    assert "● retrying in 0.01 s (1 of 3): 429 Rate limit reached" in limited
    assert "✗ gave up after 3 retries: 429 Rate limit reached" in limited


def test_the_command_line_never_lets_the_prompt_read_as_an_option(tmp_path):
    d = get_driver("pi", {"path": "/bin/true"})
    assert isinstance(d, PiDriver)
    argv = d.argv(ctx(tmp_path))
    assert argv[:4] == ["/bin/true", "-p", "--mode", "json"]
    assert argv[-1].startswith(" -v: add a hello file")
    sid = "01a24dd1-14b9-75b1-8fe5-e32ade83c86f"
    again = d.argv(ctx(tmp_path, resume=sid, message="@file and -x"))
    assert again[-3:] == ["--session", sid, " @file and -x"]
    # a session id not of the shape of one is not passed on
    assert "--session" not in d.argv(ctx(tmp_path, resume="--help"))
    assert d.env(ctx(tmp_path))["PI_OFFLINE"] == "1"


def test_its_state_folder_and_its_provider_are_kept_for_a_contained_run(tmp_path):
    pi = agentstate.AGENTS["pi"]
    assert pi.state == ("$PI_CODING_AGENT_DIR|~/.pi/agent",)
    assert pi.fixed == ("$PI_CODING_AGENT_DIR/models.json|~/.pi/agent/models.json",)
    folder = tmp_path / ".pi" / "agent"
    folder.mkdir(parents=True)
    models = {
        "providers": {
            "local": {"baseUrl": "http://127.0.0.1:11434/v1", "apiKey": "LOCAL_KEY"},
            "far": {"baseUrl": "https://api.example.com/v1", "apiKey": "sk-literal"},
        }
    }
    (folder / "models.json").write_text(json.dumps(models))
    got = agentconf.needs("pi", str(tmp_path), {"LOCAL_KEY": "x"})
    assert got.ports == (11434,) and got.env_keep == ("LOCAL_KEY",)
    (folder / "models.json").write_text("{broken")
    assert agentconf.needs("pi", str(tmp_path), {}) == agentconf.Needs()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=8), st.integers(-5, 300))
def test_no_line_makes_the_reader_or_the_log_raise(junk, code):
    events = [
        '{"type":"message_end","message":{"role":"assistant","stopReason":"error",'
        '"errorMessage":' + json.dumps(t) + "}}"
        for t in junk
    ]
    read_report([*junk, *events], code, now=NOW)
    for line in [*junk, *events]:
        render_line(line)


# ---------------------------------------------------------------- Claude


def test_claudes_checkpoint_is_read_from_the_rate_limit_event():
    rep = claude_report(lines("claude-checkpoint.jsonl"), now=NOW)
    assert rep.at_checkpoint and rep.limit == "five_hour"
    event = next(json.loads(x) for x in lines("claude-checkpoint.jsonl") if "rate_limit_event" in x)
    assert rep.resets_at == event["rate_limit_info"]["unifiedWindows"]["five_hour"]["resetsAt"]
    assert rep.last_message and rep.last_message.endswith("2. Commit it")


def _with(used: float, status: str, is_error: bool = False) -> list[str]:
    """The captured stream with the window's share and status changed."""
    out = []
    for line in lines("claude-checkpoint.jsonl"):
        event = json.loads(line)
        if event.get("type") == "rate_limit_event":
            info = event["rate_limit_info"]
            info["status"] = info["unifiedWindows"]["five_hour"]["status"] = status
            info["utilization"] = info["unifiedWindows"]["five_hour"]["utilization"] = used
        if event.get("type") == "result":
            event["is_error"] = is_error
        out.append(json.dumps(event))
    return out


def test_below_the_checkpoint_or_without_the_warning_or_on_an_error_a_turn_is_done():
    assert claude_report(_with(CHECKPOINT_AT, "allowed_warning"), now=NOW).at_checkpoint
    for used, status, err in (
        (CHECKPOINT_AT - 0.01, "allowed_warning", False),
        (0.99, "allowed", False),
        (0.99, "allowed_warning", True),
        (float("nan"), "allowed_warning", False),
    ):
        rep = claude_report(_with(used, status, err), now=NOW)
        assert not rep.at_checkpoint and rep.limit is None, (used, status, err)


# The moment the checkpoint's stream was captured: its window resets an hour
# later (resetsAt 1796609775). Judged at the real time, the test would pass
# only until that reset.
CAPTURED = 1796609775 - 3600


def test_the_checkpoint_is_a_wait_that_runs_no_check_and_carries_the_list_on():
    rep = claude_report(lines("claude-checkpoint.jsonl"), now=CAPTURED)
    v = jobrules.judge(
        agent="claude",
        outcome="succeeded",
        ended_by="exit",
        exit_code=0,
        reason=None,
        report=rep,
        strikes=0,
        now=CAPTURED,
    )
    assert v.outcome == "interrupted" and not v.spends_attempt
    assert v.reason and v.reason.startswith(
        "Claude stopped at the limit (its 5-hour usage limit's checkpoint); resets "
    )
    assert v.wait is not None and v.wait.until == rep.resets_at
    prior = jobrules.Prior(outcome="interrupted", reason=v.reason, session_id="s")
    said = jobrules.resume_message(prior, (), None)
    assert "checkpoint" in said and "carry on with that work" in said
