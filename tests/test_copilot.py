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

from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project
from support.agent_clis import require
from support.chat_agents import COMMIT, HELLO, contained_daemon, reply_goes_on, to_review
from support.chat_agents import waits_out_a_rate_limit
from support.chat_stub import MODEL, ChatStub, RateLimit, Say, Shell

pytestmark = pytest.mark.agent_clis


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
    return contained_daemon(tmp_path, "copilot", {"path": require("copilot")}, env)


def test_a_job_reaches_review_and_a_reply_resumes_its_session(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with ChatStub(script) as stub, copilot_daemon(tmp_path, stub) as d:
        job, run, log = to_review(d, project, "copilot")
        assert run["usage"]["premium_requests"] == 0 and run["usage"]["num_turns"] == 2
        assert f"✓ result (session {run['session_id']}" in log
        assert HELLO in stub.turns()[0].text()

        reply_goes_on(d, job, stub)


def test_a_rate_limit_is_a_wait_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with ChatStub([RateLimit(6, retry_after_ms=10)]) as stub, copilot_daemon(tmp_path, stub) as d:
        waits_out_a_rate_limit(d, project, "copilot", 300)
        assert len(stub.turns()) == 6
