"""The OpenCode and Copilot drivers read their CLIs' real output (recorded from
OpenCode 1.18.33 and Copilot CLI 1.0.102 against the Chat Completions stub in
tests/support: a Run that commits, a 429 after each CLI's own five retries,
a 5xx after OpenCode's, a resume of a session it does not know, and Copilot
run with no account signed in).

GitHub's own limits ("402 You have no quota", its hourly rate limit) cannot
be met here without a GitHub account: they are read from their words.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from owl.agents import RunContext, get_driver
from owl.agents.copilot import CopilotDriver
from owl.agents.copilot_stream import read_report as copilot_report
from owl.agents.opencode import OpenCodeDriver
from owl.agents.opencode_stream import read_report as opencode_report
from owl.agents.opencode_stream import session_in as opencode_session
from owl.agents.render import render_line
from owl.sandbox import agentstate

STREAMS = Path(__file__).parent / "support" / "streams"
NOW = time.time()


def lines(name: str) -> list[str]:
    return (STREAMS / name).read_text().splitlines()


def ctx(tmp: Path, **kw: object) -> RunContext:
    base = dict(
        job_id=1, run_id=2, attempt=1, job_prompt="-rf do it", worktree=tmp, branch="b", base="a"
    )
    base.update(kw)
    return RunContext(**base)  # type: ignore[arg-type]


def test_both_are_built_in() -> None:
    assert isinstance(get_driver("opencode", {}), OpenCodeDriver)
    assert isinstance(get_driver("copilot", None), CopilotDriver)


def test_opencode_success_gives_session_message_usage_and_dollars() -> None:
    rep = opencode_report(lines("opencode-ok.jsonl"), 0, now=NOW)
    assert rep.session_id and rep.session_id.startswith("ses_")
    assert opencode_session(lines("opencode-ok.jsonl")) == rep.session_id
    assert rep.last_message == "Committed hello.txt."
    u = rep.usage or {}
    assert u["input_tokens"] == 2468 and u["output_tokens"] == 112 and u["num_turns"] == 2
    assert abs(u["total_cost_usd"] - 0.003588) < 1e-9
    assert rep.limit is None and rep.service_error is None


def test_opencode_rate_limit_waits_for_the_providers_words() -> None:
    rep = opencode_report(lines("opencode-limit.jsonl"), 1, now=NOW)
    assert rep.limit == "rate_limit"
    assert rep.resets_at is not None and abs(rep.resets_at - (NOW + 432)) < 1


def test_opencode_retry_after_header_is_a_reset_when_the_words_say_none() -> None:
    error = {
        "name": "APIError",
        "data": {
            "message": "Too Many Requests",
            "statusCode": 429,
            "responseHeaders": {"retry-after": "600"},
        },
    }
    line = json.dumps({"type": "error", "sessionID": "ses_x", "error": error})
    rep = opencode_report([line], 1, now=NOW)
    assert rep.limit == "rate_limit" and rep.resets_at == NOW + 600
    error["data"]["responseHeaders"] = {"retry-after": "1e12"}  # no real reset
    rep = opencode_report([json.dumps({"type": "error", "error": error})], 1, now=NOW)
    assert rep.limit == "rate_limit" and rep.resets_at is None


def test_opencode_server_error_is_a_service_wait() -> None:
    rep = opencode_report(lines("opencode-5xx.jsonl"), 1, now=NOW)
    assert rep.service_error == "HTTP 500" and rep.limit is None


def test_opencode_providers_outage_words_are_matched_never_repeated_as_owls() -> None:
    """A provider that says "Internal error" with no HTTP status is an outage
    (a wait, no attempt spent), named in Owl's own words, not the provider's."""
    error = {"type": "error", "error": {"name": "APIError", "data": {"message": "Internal error"}}}
    rep = opencode_report([json.dumps(error)], 1, now=NOW)
    assert rep.service_error == "connection error" and rep.limit is None
    assert "internal" not in repr(rep).lower()


def test_opencode_refused_resume_falls_back() -> None:
    rep = opencode_report(lines("opencode-resume.txt"), 1, resuming=True, now=NOW)
    assert rep.resume_failed == "Error: Session not found"


def test_copilot_success_gives_session_message_and_premium_requests() -> None:
    rep = copilot_report(lines("copilot-ok.jsonl"), 0, now=NOW)
    assert rep.session_id and len(rep.session_id) == 36
    assert rep.last_message == "Committed hello.txt."
    assert rep.usage and rep.usage["premium_requests"] == 0 and rep.usage["num_turns"] == 2


def test_copilot_session_is_the_one_owl_named_once_the_cli_took_the_prompt(tmp_path) -> None:
    d = CopilotDriver({"path": "/bin/true"})
    argv = d.argv(ctx(tmp_path))
    named = next(a for a in argv if a.startswith("--session-id="))
    chosen = named.split("=", 1)[1]
    ok = lines("copilot-ok.jsonl")
    stopped = [x for x in ok if '"type":"result"' not in x]  # killed before its end
    assert d.session_in(stopped) == chosen
    assert d.report(stopped, -9, resuming=False, now=NOW).session_id == chosen
    assert d.session_in(stopped[:2]) is None  # the prompt not yet taken


def test_copilot_rate_limit_waits_for_the_providers_words() -> None:
    rep = copilot_report(lines("copilot-limit.jsonl"), 1, now=NOW)
    assert rep.limit == "rate_limit"
    # "retried 5 times (total retry wait time: 59.41 seconds) ... try again in 7m12s"
    assert rep.resets_at is not None and abs(rep.resets_at - (NOW + 432)) < 1


def test_copilot_githubs_own_limits_are_waits() -> None:
    def error(status: int, message: str) -> str:
        kind = "quota" if status == 402 else "rate_limit"
        data = {"errorType": kind, "message": message, "statusCode": status}
        return json.dumps({"type": "session.error", "data": data})

    rep = copilot_report([error(402, "402 You have no quota")], 1, now=NOW)
    assert rep.limit == "usage" and rep.resets_at is None
    hourly = (
        "Sorry, you've hit a rate limit that restricts the number of Copilot model requests "
        "you can make within a specific time period. Please try again in 2 hours."
    )
    rep = copilot_report([error(429, hourly)], 1, now=NOW)
    assert rep.limit == "rate_limit" and rep.resets_at == NOW + 7200


def test_copilot_refused_resume_falls_back_and_no_account_fails() -> None:
    rep = copilot_report(lines("copilot-resume.txt"), 1, resuming=True, now=NOW)
    assert rep.resume_failed and "No session, task, or name matched" in rep.resume_failed
    said = lines("copilot-not-signed-in.txt")
    assert said[0] == "Error: No authentication information found."
    rep = copilot_report(said, 1, now=NOW)
    assert rep.limit is None and rep.service_error is None and rep.resume_failed is None
    assert copilot_report(said, 1, resuming=True, now=NOW).resume_failed is None


def test_argv_keeps_prompt_and_session_from_being_options(tmp_path: Path) -> None:
    o = OpenCodeDriver({"path": "/bin/true"})
    fresh = o.argv(ctx(tmp_path))
    assert fresh[1:5] == ["run", "--format", "json", "--auto"]
    assert fresh[-2] == "--" and fresh[-1].startswith("-rf do it")
    again = o.argv(ctx(tmp_path, resume="ses_abc123", message="carry on"))
    assert again[-3:] == ["--session=ses_abc123", "--", "carry on"]
    hostile = o.argv(ctx(tmp_path, resume="--config=x", message="m"))
    assert not any(a.startswith("--session") for a in hostile)
    c = CopilotDriver({"path": "/bin/true"})
    argv = c.argv(ctx(tmp_path))
    for flag in ("--allow-all-tools", "--allow-all-paths", "--no-ask-user"):
        assert flag in argv
    assert argv[-1].startswith("--prompt=-rf do it")
    sid = "0f1658cb-b2b4-45b8-b3d2-41a57477022f"
    assert c.argv(ctx(tmp_path, resume=sid, message="m"))[-2:] == [f"--resume={sid}", "--prompt=m"]
    assert not any(a.startswith("--resume") for a in c.argv(ctx(tmp_path, resume="-x y")))


def test_logs_render_readably() -> None:
    shown = [render_line(x) for x in lines("opencode-ok.jsonl") + lines("copilot-ok.jsonl")]
    text = "\n".join(s for s in shown if s)
    assert "→ bash: echo hello > hello.txt" in text
    assert "✓ step done (1.2k in, 56 out, $0.0018)" in text
    assert "← committed <shellId: 0 completed with exit code 0>" in text
    assert "✓ result (session ad8b592d-07f3-4dcc-a745-b34063956299" in text
    limit = [render_line(x) for x in lines("opencode-limit.jsonl")]
    assert limit[0] and limit[0].startswith("✗ HTTP 429: Rate limit reached")
    # ephemeral events stay in the raw log
    assert render_line('{"type":"session.background_tasks_changed","data":{}}') is None


def test_opencode_config_gives_its_providers_port_and_key(tmp_path: Path) -> None:
    from owl.sandbox import agentconf

    cfg = tmp_path / ".config" / "opencode"
    cfg.mkdir(parents=True)
    doc = {
        "provider": {
            "local": {
                "options": {"baseURL": "http://127.0.0.1:11434/v1", "apiKey": "{env:MY_KEY}"}
            },
            "far": {"options": {"baseURL": "https://example.com:8443/v1", "apiKey": "sk-x"}},
            "odd": {"options": {"baseURL": 7, "apiKey": "{env:-rf}"}},
        }
    }
    (cfg / "opencode.json").write_text(json.dumps(doc))
    said = agentconf.needs("opencode", str(tmp_path), {})
    assert said.ports == (11434,) and said.env_keep == ("MY_KEY",)
    # a file that is not JSON, or none, says nothing
    (cfg / "opencode.json").write_text("{" * 100000)
    assert agentconf.needs("opencode", str(tmp_path), {}).ports == ()
    assert agentconf.needs("opencode", str(tmp_path / "nowhere"), {}).ports == ()
    # it is laid read-only over the writable config folder: no Run widens the next one's reach
    assert agentstate.AGENTS["opencode"].fixed == (
        "$XDG_CONFIG_HOME/opencode/opencode.json|~/.config/opencode/opencode.json",
    )


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=-(2**31), max_value=2**31))
def test_readers_never_raise(text: str, code: int) -> None:
    for line in (
        text,
        json.dumps({"type": "error", "sessionID": text, "error": {"data": {"message": text}}}),
        json.dumps({"type": "step_finish", "part": {"tokens": text, "cost": text}}),
        json.dumps({"type": "session.error", "data": {"message": text, "statusCode": text}}),
        json.dumps({"type": "result", "sessionId": text, "exitCode": code, "usage": text}),
        json.dumps({"type": "tool_use", "sessionID": "s", "part": {"state": text}}),
    ):
        opencode_report([line], code, resuming=True, now=NOW)
        copilot_report([line], code, resuming=True, now=NOW, chosen=text)
        render_line(line)


def test_owl_agents_lists_every_built_in_found_or_not(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "OWL_HOME": str(tmp_path / "owl"),
        "PATH": str(tmp_path / "empty"),  # no agent's CLI anywhere
        "HOME": str(tmp_path),
    }
    p = subprocess.run(
        [sys.executable, "-m", "owl", "agents", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    rows = rows["agents"] if isinstance(rows, dict) else rows
    names = [r["name"] for r in rows]
    assert names[:7] == ["claude", "codex", "gemini", "opencode", "copilot", "pi", "aider"]
    for r in rows[:7]:
        assert r["built_in"] and not r["found"] and r["problem"]
