"""The Codex, Gemini and aider drivers read their CLIs' real output (recorded
from Codex 0.171.0, Gemini 0.61.0 and aider 0.86.2 against the stubs in
tests/support; aider-limit.txt is a full-length rate limit, 110 s of aider's
and the OpenAI client's retries, on an 80-column console).

The service-error cases are read here from recorded or reconstructed output
rather than waited for through the daemon: Codex retries a 5xx itself for
about 25 s, Gemini for about 4 minutes, before either says so.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from owl.agents import (
    AiderDriver,
    CodexDriver,
    GeminiDriver,
    RunContext,
    aider,
    codex_stream,
    gemini_stream,
    get_driver,
    resets,
)
from owl.agents.render import render_line
from owl.rules.jobrules import Report

STREAMS = Path(__file__).parent / "support" / "streams"
NOW = time.time()


def lines(name: str) -> list[str]:
    return (STREAMS / name).read_text().splitlines()


def ctx(tmp: Path, **kw: object) -> RunContext:
    base = dict(
        job_id=1,
        run_id=2,
        attempt=1,
        job_prompt="-rf do it",
        worktree=tmp,
        branch="owl/job-1",
        base="abc",
    )
    base.update(kw)
    return RunContext(**base)  # type: ignore[arg-type]


def test_built_in_names_need_no_config() -> None:
    assert isinstance(get_driver("codex", {}), CodexDriver)
    assert isinstance(get_driver("gemini", None), GeminiDriver)
    assert isinstance(get_driver("aider", {}), AiderDriver)


def test_codex_success_gives_thread_message_and_usage() -> None:
    rep = codex_stream.read_report(lines("codex-ok.jsonl"), now=NOW)
    assert rep.session_id and len(rep.session_id) == 36
    assert rep.last_message == "All done."
    assert rep.usage and rep.usage["input_tokens"] == 200 and rep.usage["output_tokens"] == 20
    assert rep.limit is None and rep.service_error is None
    assert codex_stream.session_in(lines("codex-ok.jsonl")) == rep.session_id


def test_codex_usage_limit_reads_its_reset_words() -> None:
    got = lines("codex-limit.jsonl")
    rep = codex_stream.read_report(got, now=NOW)
    assert rep.limit == "usage"
    # "try again at 9:50 PM." names the next such minute in the machine's zone
    assert rep.resets_at is not None and NOW < rep.resets_at <= NOW + 86400
    assert datetime.fromtimestamp(rep.resets_at).second == 0


def test_codex_refused_resume_falls_back() -> None:
    rep = codex_stream.read_report(lines("codex-resume.jsonl"), resuming=True, now=NOW)
    assert rep.resume_failed and "no rollout found" in rep.resume_failed
    assert rep.session_id is None


def test_codex_service_error_after_its_own_retries() -> None:
    rep = codex_stream.read_report(lines("codex-5xx.jsonl"), now=NOW)
    assert rep.limit is None and rep.service_error == "overloaded"


def test_gemini_success_gives_session_message_and_usage() -> None:
    rep = gemini_stream.read_report(lines("gemini-ok.jsonl"), 0, now=NOW)
    assert rep.session_id and rep.last_message == "All done."
    assert rep.usage and rep.usage["input_tokens"] == 300 and rep.usage["tool_calls"] == 1


def test_gemini_daily_quota_waits_for_its_retry_delay() -> None:
    rep = gemini_stream.read_report(lines("gemini-limit.jsonl"), 173, now=NOW)
    assert rep.limit == "usage"
    assert rep.resets_at is not None and abs(rep.resets_at - (NOW + 3596)) < 1


def test_gemini_refused_resume_falls_back() -> None:
    rep = gemini_stream.read_report(lines("gemini-resume.jsonl"), 42, resuming=True, now=NOW)
    assert rep.resume_failed and "Error resuming session" in rep.resume_failed


def test_gemini_server_error_is_a_service_wait() -> None:
    # As the CLI ends after its own retries: the result says the API error, exit 500 % 256.
    result = {
        "type": "result",
        "status": "error",
        "error": {"type": "unknown", "message": "[API Error: stub failed]"},
        "stats": {"total_tokens": 0},
    }
    rep = gemini_stream.read_report([json.dumps(result)], 500 % 256, now=NOW)
    assert rep.service_error == "HTTP 500" and rep.limit is None


def test_aider_reply_cost_line_and_commit() -> None:
    rep = aider.read_report(lines("aider-ok.txt"), 0, now=NOW)
    assert rep.limit is None and rep.gave_up is None and rep.session_id is None
    assert rep.last_message == "I will add hello.txt."
    assert rep.usage == {
        "input_tokens": 1200,
        "output_tokens": 56,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "num_turns": 1,
        "total_cost_usd": 0.0018,
    }
    # a restored chat names the files it adds before the reply: not the reply
    assert aider.read_report(lines("aider-restored.txt"), 0, now=NOW).last_message == "Added bye."


def test_aider_gives_up_on_a_rate_limit_and_exits_0() -> None:
    out = lines("aider-limit.txt")
    rep = aider.read_report(out, 0, now=NOW)
    # the provider's "Please try again in 7m12s." was wrapped over two lines of 80 columns
    assert rep.limit == "rate_limit" and rep.resets_at == NOW + 432
    assert rep.reset_said == "try again in 7m12s"
    assert rep.gave_up and rep.gave_up.startswith("litellm.RateLimitError: RateLimitError:")
    # still retrying (the Run killed before aider gave up): the limit, not a give-up
    retrying = out[: max(i for i, ln in enumerate(out) if ln.startswith("Retrying in")) + 1]
    rep = aider.read_report(retrying, -15, now=NOW)
    assert rep.limit == "rate_limit" and rep.gave_up is None


def test_aider_errors_by_kind() -> None:
    def said(*words: str) -> Report:
        return aider.read_report(["Aider v0.86.2", "", *words, ""], 0, now=NOW)

    quota = said(
        "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your "
        "current quota, please check your plan and billing details.",
        "The API provider has rate limited you. Try again later or check your quotas.",
    )
    assert quota.limit == "usage" and quota.resets_at is None and quota.gave_up
    down = said(
        "litellm.InternalServerError: InternalServerError: OpenAIException - stub failed",
        "The API provider's servers are down or overloaded.",
    )
    assert down.service_error == "server error" and down.limit is None and down.gave_up
    gone = said("litellm.APIConnectionError: APIConnectionError: OpenAIException - refused")
    assert gone.service_error == "connection error"
    key = said(
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key",
        "The API provider is not able to authenticate you. Check your API key.",
    )
    assert key.limit is key.service_error is None
    assert key.gave_up and "bad key" in key.gave_up
    # an error aider got past: the reply after it says the Run went on
    past = said(
        "litellm.RateLimitError: RateLimitError: OpenAIException - slow down",
        "Retrying in 0.2 seconds...",
        "Done.",
        "Tokens: 2.5k sent, 10 received.",
    )
    assert past.limit is None and past.gave_up is None and past.last_message == "Done."
    assert past.usage and past.usage["total_cost_usd"] is None


def test_aider_argv_restores_the_chat_after_any_earlier_run(tmp_path: Path) -> None:
    d = AiderDriver({"path": "/bin/true", "args": ["--model", "openai/x"]})
    first = d.argv(ctx(tmp_path))
    assert first[1].startswith("--message=-rf do it") and "--restore-chat-history" not in first
    assert first[-2:] == ["--model", "openai/x"] and "--yes-always" in first
    # a Run after one that waited on a limit: no attempt spent, but a chat to restore
    assert "--restore-chat-history" in d.argv(ctx(tmp_path, earlier=1))
    assert "--restore-chat-history" in d.argv(ctx(tmp_path, attempt=2))
    env = d.env(ctx(tmp_path))
    assert env["BROWSER"] == "true" and int(env["COLUMNS"]) >= 400


def test_argv_keeps_prompt_and_session_from_being_options(tmp_path: Path) -> None:
    c = CodexDriver({"path": "/bin/true"})
    fresh = c.argv(ctx(tmp_path))
    assert fresh[-2] == "--" and fresh[-1].startswith("-rf do it")
    sid = "01a2335e-c68f-77d3-aa55-821659948ae6"
    again = c.argv(ctx(tmp_path, resume=sid, message="carry on"))
    assert again[1:3] == ["exec", "resume"] and again[-3:] == [sid, "--", "carry on"]
    # A session id that could be an option is never passed: a fresh start instead.
    hostile = c.argv(ctx(tmp_path, resume="--config=x", message="m"))
    assert "resume" not in hostile and "--config=x" not in hostile
    g = GeminiDriver({"path": "/bin/true"})
    assert g.argv(ctx(tmp_path))[-1].startswith("-p=-rf do it")
    assert g.argv(ctx(tmp_path, resume=sid, message="m"))[-2:] == [f"-r={sid}", "-p=m"]
    assert not any(a.startswith("-r") for a in g.argv(ctx(tmp_path, resume="-x y", message="m")))


def test_codex_runs_without_its_own_sandbox_inside_owls(tmp_path: Path) -> None:
    # Its workspace-write sandbox keeps every .git read-only: no commit could be made.
    argv = CodexDriver({"path": "/bin/true"}).argv(ctx(tmp_path))
    assert "--dangerously-bypass-approvals-and-sandbox" in argv and "--sandbox" not in argv


def test_gemini_settings_problem_is_said(tmp_path: Path, monkeypatch) -> None:
    from owl.agents.gemini import settings_problem

    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert "selectedType" in (settings_problem(tmp_path) or "")
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(
        json.dumps(
            {
                "security": {
                    "auth": {"selectedType": "gemini-api-key"},
                    "folderTrust": {"enabled": True},
                }
            }
        )
    )
    assert "folder trust" in (settings_problem(tmp_path) or "")


def test_logs_render_readably() -> None:
    shown = [render_line(x) for x in lines("codex-ok.jsonl") + lines("gemini-ok.jsonl")]
    text = "\n".join(s for s in shown if s)
    assert "● codex thread" in text and "→ shell:" in text and "All done." in text
    assert "● gemini" in text and "→ run_shell_command: echo hi > f.txt" in text
    assert "✓ result (1 tool calls" in text
    assert render_line('{"type":"item.completed","item":{"type":"new_kind"}}') is None


def test_reset_words_of_every_form() -> None:
    u = UTC
    now = datetime(2026, 12, 1, 18, 0, tzinfo=u).timestamp()
    at = lambda t: resets.reset_moment(t, now, u)
    assert at("or try again at 7:57 PM.") == datetime(2026, 12, 1, 19, 57, tzinfo=u).timestamp()
    assert at("or try again at 5:57 PM.") == datetime(2026, 12, 2, 17, 57, tzinfo=u).timestamp()
    assert (
        at("Try again at Dec 4th, 2026 6:27 PM.")
        == datetime(2026, 12, 4, 18, 27, tzinfo=u).timestamp()
    )
    assert at("Please retry in 3596s. Suggested retry after 3596s.") == now + 3596
    assert abs(at("Please retry in 56.639749873s.") - (now + 56.64)) < 0.01
    assert at("Your quota will reset after 1h49m8s.") == now + 6548
    assert at("resets 8:10am (Europe/Paris)") == datetime(2026, 12, 2, 7, 10, tzinfo=u).timestamp()
    for absurd in (
        "retry in 999999999s",
        "try again at 25:61 PM",
        "Try again at Feb 30th, 2026 6:27 PM.",
        "Try again at Dec 4th, 1999 6:27 PM.",
        "x" * 100000,
    ):
        assert at(absurd) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.integers(min_value=-(2**40), max_value=2**40))
def test_readers_never_raise(text: str, code: int) -> None:
    resets.reset_moment(text, NOW)
    resets.reset_moment("try again at " + text, NOW)
    resets.reset_moment("retry in " + text, NOW)
    for line in (
        text,
        json.dumps({"type": "turn.failed", "error": text}),
        json.dumps({"type": "result", "status": "error", "error": {"message": text}}),
        json.dumps({"type": "item.completed", "item": text}),
    ):
        codex_stream.read_report([line], resuming=True, now=NOW)
        gemini_stream.read_report([line], code % 256, resuming=True, now=NOW)
        aider.read_report([line], code, now=NOW)
        render_line(line)


def test_codex_usage_of_a_resumed_thread_counts_this_run_only() -> None:
    first = codex_stream.read_report(lines("codex-ok.jsonl"), now=NOW).usage
    assert first is not None
    later = dict(
        first,
        input_tokens=500,
        output_tokens=50,
        thread={"input_tokens": 500, "cache_read_input_tokens": 40, "output_tokens": 50},
    )
    own = codex_stream.per_run(later, first)
    assert (own["input_tokens"], own["output_tokens"]) == (300, 30)
    assert codex_stream.per_run(later, None) == later


AIDER_BITS = [
    "litellm.RateLimitError: RateLimitError: OpenAIException - try again in 3h",
    "The API provider has rate limited you. Try again later or check your quotas.",
    "Retrying in 0.2 seconds...",
    "Tokens: 1.2k sent, 56 received. Cost: $0.0018 message, $0.0018 session.",
    "Tokens: 9,999m sent, 1e9 received.",
    "```",
    "hello.txt",
    "Aider v0.86.2",
    "",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(AIDER_BITS), st.text(max_size=80)), max_size=40))
def test_aider_output_in_any_order_is_read_within_bounds(out: list[str]) -> None:
    rep = aider.read_report(out, 0, now=NOW)
    assert rep.gave_up is None or len(rep.gave_up) <= 600
    assert rep.last_message is None or len(rep.last_message) <= 4000
    assert rep.limit in (None, "rate_limit", "usage")


def test_aider_output_of_any_size_is_read_by_its_bounded_tail() -> None:
    # lines cut at 2,000 characters, the last 4,000 lines read: no pattern
    # sees more, whatever the agent printed
    huge = ["a." * 50_000, "litellm.RateLimitError: " + "9" * 100_000, "x/" * 50_000] * 3000
    rep = aider.read_report(huge, 0, now=NOW)
    assert rep.limit == "rate_limit" and rep.gave_up and len(rep.gave_up) <= 600
