"""OpenCode as a built-in agent, with the REAL CLI, through the real daemon.

OpenCode runs against a local Chat Completions stub on 127.0.0.1: a provider
in ~/.config/opencode/opencode.json (`"npm": "@ai-sdk/openai-compatible"`,
`options.baseURL` at the stub). The agent is named only (`--agent opencode`),
and every Run is contained (`sandbox.mode = "required"`): the stub's port is
kept reachable because opencode.json names it, with nothing in Owl's config.

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project
from support.agent_clis import require
from support.chat_agents import COMMIT, HELLO, contained_daemon, reply_goes_on, to_review
from support.chat_agents import waits_out_a_rate_limit
from support.chat_stub import ChatStub, RateLimit, Say, Shell

pytestmark = pytest.mark.agent_clis


def opencode_daemon(tmp_path: Path, stub: ChatStub) -> OwlDaemon:
    env = stub.opencode_env(tmp_path / "user-home")
    # --pure: no plugins. Without it OpenCode 1.18 first installs its plugin
    # package from npm into its config folder and waits for it; here the
    # registry's connection from inside a Run hangs (as measured).
    cfg = {"path": require("opencode"), "args": ["--pure"]}
    return contained_daemon(tmp_path, "opencode", cfg, env)


def test_a_job_reaches_review_and_a_reply_carries_the_session_on(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with ChatStub(script) as stub, opencode_daemon(tmp_path, stub) as d:
        job, run, log = to_review(d, project, "opencode")
        assert run["session_id"].startswith("ses_")
        # two model requests, each its own tokens and dollars (the stub's prices)
        usage = run["usage"]
        assert usage["input_tokens"] == 2 * 1234 and usage["output_tokens"] == 2 * 56
        assert usage["total_cost_usd"] == pytest.approx(2 * (1234e-6 + 56e-5))
        assert "✓ step done (1.2k in, 56 out, $0.0018)" in log
        # the prompt (which starts with "-") reached the model whole, with Owl's contract
        first = stub.turns()[0].text()
        assert HELLO in first and "HANDOFF" in first

        _, second = reply_goes_on(d, job, stub)
        # the Run counts its own request only
        assert second["usage"]["input_tokens"] == 1234


def test_a_rate_limit_is_a_wait_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    # OpenCode retries a 429 five times itself (here 10 ms apart, as the
    # provider's retry-after-ms asks), then gives the provider's words
    with ChatStub([RateLimit(6, retry_after_ms=10)]) as stub, opencode_daemon(tmp_path, stub) as d:
        j = waits_out_a_rate_limit(d, project, "opencode", 200)
        assert len(stub.turns()) == 6 and len(j["runs"]) == 1
