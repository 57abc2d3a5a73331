"""GitHub Copilot CLI as a built-in agent, with the REAL CLI, through the real daemon.

Copilot CLI takes a model provider of the person's own instead of GitHub's
(`COPILOT_PROVIDER_BASE_URL`, type "openai": Chat Completions), and with
`COPILOT_OFFLINE=true` it reaches for nothing else: here that provider is a
stub on 127.0.0.1, and no GitHub account is needed. GitHub's own premium
request limit cannot be met this way; its words are read in
test_agent_streams.py. The agent is named only (`--agent copilot`), and
every Run is contained.

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project, wait_for
from support.agent_clis import require
from support.chat_stub import MODEL, ChatStub, RateLimit, Say, Shell

pytestmark = pytest.mark.agent_clis

COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)


def copilot_daemon(tmp_path: Path, stub: ChatStub) -> OwlDaemon:
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "COPILOT_PROVIDER_BASE_URL": f"{stub.url}/v1",
        "COPILOT_PROVIDER_API_KEY": "test",
        "COPILOT_MODEL": MODEL,
        "COPILOT_OFFLINE": "true",
        "NO_COLOR": "1",
    }
    cfg = {"agents": {"copilot": {"path": require("copilot")}}, "sandbox": {"mode": "required"}}
    return OwlDaemon(tmp_path / "owl", cfg, env=env)


def test_a_job_reaches_review_and_a_reply_resumes_its_session(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with ChatStub(script) as stub, copilot_daemon(tmp_path, stub) as d:
        job = d.add("-v: add a hello file and commit it.", project, "--agent", "copilot")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=300)
        [run] = j["runs"]
        assert run["outcome"] == "succeeded", run
        assert run["last_message"] == "Committed hello.txt."
        assert run["contained"].startswith("contained: bwrap")
        assert run["usage"]["premium_requests"] == 0 and run["usage"]["num_turns"] == 2
        log = d.ok("logs", str(job), "--run", str(run["id"]))
        assert "→ bash: echo hello > hello.txt" in log and "← committed" in log
        assert f"✓ result (session {run['session_id']}" in log
        assert "Add hello" in d.ok("jobs", "show", str(job))
        assert "-v: add a hello file and commit it." in stub.turns()[0].text()

        d.ok("jobs", "reply", str(job), "Please also add a goodbye file.")
        j = d.wait_job(job, "review", timeout=300)
        first, second = j["runs"]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        assert second["last_message"] == "Added the goodbye too."
        later = stub.turns()[-1].text()
        assert later.index("add a hello file") < later.index("Please also add a goodbye file.")
        assert j["attempts_left"] == j["attempts"]


def test_a_rate_limit_is_a_wait_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with ChatStub([RateLimit(6, retry_after_ms=10)]) as stub, copilot_daemon(tmp_path, stub) as d:
        job = d.add("Say done.", project, "--agent", "copilot", "--attempts", "1")
        d.machine("idle")
        began = time.time()
        j = wait_for(
            lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
            300,
            what="the first Run to end",
        )
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith("copilot's API rate limit (HTTP 429); resets at ")
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        [w] = d.status()["limits"]
        assert w["agent"] == "copilot"
        # "Please try again in 7m12s."
        assert 432 - 5 <= w["until_epoch"] - began <= 432 + (time.time() - began)
        assert len(stub.turns()) == 6
