"""OpenCode as a built-in agent, with the REAL CLI, through the real daemon.

OpenCode runs against a local Chat Completions stub on 127.0.0.1: a provider
in ~/.config/opencode/opencode.json (`"npm": "@ai-sdk/openai-compatible"`,
`options.baseURL` at the stub). The agent is named only (`--agent opencode`),
and every Run is contained (`sandbox.mode = "required"`): the stub's port is
kept reachable because opencode.json names it, with nothing in Owl's config.

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project, wait_for
from support.agent_clis import require
from support.chat_stub import ChatStub, RateLimit, Say, Shell

pytestmark = pytest.mark.agent_clis

COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)


def opencode_daemon(tmp_path: Path, stub: ChatStub) -> OwlDaemon:
    home = tmp_path / "user-home"
    env = stub.opencode_env(home)
    # --pure: no plugins. Without it OpenCode 1.18 first installs its plugin
    # package from npm into its config folder and waits for it; here the
    # registry's connection from inside a Run hangs (as measured).
    cfg = {
        "agents": {"opencode": {"path": require("opencode"), "args": ["--pure"]}},
        "sandbox": {"mode": "required"},
    }
    return OwlDaemon(tmp_path / "owl", cfg, env=env)


def test_a_job_reaches_review_and_a_reply_carries_the_session_on(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with ChatStub(script) as stub, opencode_daemon(tmp_path, stub) as d:
        job = d.add("-v: add a hello file and commit it.", project, "--agent", "opencode")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=300)
        [run] = j["runs"]
        assert run["outcome"] == "succeeded", run
        assert run["session_id"].startswith("ses_")
        assert run["last_message"] == "Committed hello.txt."
        assert run["contained"].startswith("contained: bwrap")
        # two model requests, each its own tokens and dollars (the stub's prices)
        usage = run["usage"]
        assert usage["input_tokens"] == 2 * 1234 and usage["output_tokens"] == 2 * 56
        assert usage["total_cost_usd"] == pytest.approx(2 * (1234e-6 + 56e-5))
        log = d.ok("logs", str(job), "--run", str(run["id"]))
        assert "→ bash: echo hello > hello.txt" in log and "← committed" in log
        assert "✓ step done (1.2k in, 56 out, $0.0018)" in log
        assert "Add hello" in d.ok("jobs", "show", str(job))
        # the prompt (which starts with "-") reached the model whole, with Owl's contract
        first = stub.turns()[0].text()
        assert "-v: add a hello file and commit it." in first and "HANDOFF" in first

        d.ok("jobs", "reply", str(job), "Please also add a goodbye file.")
        j = d.wait_job(job, "review", timeout=300)
        first_run, second = j["runs"]
        assert second["resumed"] is True and second["session_id"] == first_run["session_id"]
        assert second["last_message"] == "Added the goodbye too."
        # the session's earlier turns went with the reply; the Run counts its own request only
        later = stub.turns()[-1].text()
        assert later.index("add a hello file") < later.index("Please also add a goodbye file.")
        assert second["usage"]["input_tokens"] == 1234
        assert j["attempts_left"] == j["attempts"]


def test_a_rate_limit_is_a_wait_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    # OpenCode retries a 429 five times itself (here 10 ms apart, as the
    # provider's retry-after-ms asks), then gives the provider's words
    with ChatStub([RateLimit(6, retry_after_ms=10)]) as stub, opencode_daemon(tmp_path, stub) as d:
        job = d.add("Say done.", project, "--agent", "opencode", "--attempts", "1")
        d.machine("idle")
        began = time.time()
        j = wait_for(
            lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
            90,
            what="the first Run to end",
        )
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith("opencode's API rate limit (HTTP 429); resets at ")
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        [w] = d.status()["limits"]
        assert w["agent"] == "opencode"
        # "Please try again in 7m12s."
        assert 432 - 5 <= w["until_epoch"] - began <= 432 + (time.time() - began)
        assert len(stub.turns()) == 6 and len(d.job(job)["runs"]) == 1
