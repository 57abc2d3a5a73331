"""pi as a built-in agent, with the REAL CLI, through the real daemon.

pi runs against a local Chat Completions stub on 127.0.0.1: a provider in
~/.pi/agent/models.json (`"api": "openai-completions"`, `baseUrl` at the
stub) chosen in its settings.json. The agent is named only (`--agent pi`),
and every Run is contained (`sandbox.mode = "required"`): the stub's port is
kept reachable because models.json names it, with nothing in Owl's config.

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project, wait_for
from support.agent_clis import require
from support.chat_agents import COMMIT, HELLO, contained_daemon, reply_goes_on, to_review
from support.chat_stub import ChatStub, PiRateLimit, Say, Shell, pi_env
from support.kept import the_kept_state

pytestmark = pytest.mark.agent_clis

RETRIES = 3  # pi's own, each request tried three times by its provider SDK


def pi_daemon(tmp_path: Path, stub: ChatStub, retry_ms: int = 2000, **extra) -> OwlDaemon:
    """A daemon with pi configured against `stub`, every Run contained; `extra`:
    more config tables."""
    env = pi_env(stub, tmp_path / "user-home", retry_ms)
    if not extra:
        return contained_daemon(tmp_path, "pi", {"path": require("pi")}, env)
    full = {"agents": {"pi": {"path": require("pi")}}, "sandbox": {"mode": "required"}, **extra}
    return OwlDaemon(tmp_path / "owl", full, env=env)


def test_a_job_reaches_review_and_a_reply_carries_the_session_on(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with ChatStub(script) as stub, pi_daemon(tmp_path, stub) as d:
        job, run, log = to_review(d, project, "pi")
        assert len(run["session_id"]) == 36  # pi's session header: a UUID
        # two model requests, each its own tokens and dollars (the stub's prices)
        usage = run["usage"]
        assert usage["input_tokens"] == 2 * 1234 and usage["output_tokens"] == 2 * 56
        assert usage["total_cost_usd"] == pytest.approx(2 * (1234e-6 + 56e-5))
        assert "✓ turn done (1.2k in, 56 out, $0.0018)" in log
        # the prompt (which starts with "-") reached the model whole, with Owl's contract
        first = stub.turns()[0].text()
        assert HELLO in first and "HANDOFF" in first
        # its state stayed in its own folder, outside the worktree: the one Owl keeps
        pi_state = the_kept_state(tmp_path / "owl", "pi", tmp_path / "user-home" / ".pi" / "agent")
        assert list((pi_state / "sessions").rglob("*.jsonl"))

        _, second = reply_goes_on(d, job, stub)
        # the Run counts its own request only
        assert second["usage"]["input_tokens"] == 1234


def test_a_rate_limit_is_waited_out_and_the_job_runs_again_after_the_reset(tmp_path):
    project = make_project(tmp_path / "proj")
    # every request of the first Run meets 429 (pi's 4 tries, 3 requests each);
    # the provider's words say the limit resets in 25 s
    tries = (RETRIES + 1) * 3
    script = [PiRateLimit(tries, 25), Say("Done.")]
    with ChatStub(script) as stub, pi_daemon(tmp_path, stub, retry_ms=20) as d:
        job = d.add("Say done.", project, "--agent", "pi", "--attempts", "1")
        d.machine("idle")
        j = wait_for(
            lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
            120,
            what="the first Run to end",
        )
        ended = time.time()
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith("pi's API rate limit (HTTP 429); resets at ")
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        [w] = d.status()["limits"]
        assert w["agent"] == "pi"
        assert len(stub.turns()) == tries
        refused = stub.turns()[-1].at
        assert 25 - 3 <= w["until_epoch"] - refused <= 25 + (ended - refused) + 2
        j = d.wait_job(job, "review", timeout=120)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "succeeded"]
        assert j["attempts_left"] == 1 and j["runs"][1]["last_message"] == "Done."
        # pi was not started against the limit again before it reset
        assert stub.turns()[tries].at >= w["until_epoch"]
        assert d.status()["limits"] == []


TEXT = " ".join(f"word{i}" for i in range(40)) + " All streamed."


def test_a_run_frozen_mid_stream_for_40_s_carries_on_when_thawed(tmp_path):
    project = make_project(tmp_path / "proj")
    with (
        ChatStub([Say(TEXT, over=20)]) as stub,
        pi_daemon(tmp_path, stub, interruption={"grace_window": "30m"}) as d,
    ):
        job = d.add("Say something long.", project, "--agent", "pi")
        d.machine("idle")
        wait_for(lambda: stub.turns(), timeout=120, what="the slow reply to start")
        wait_for(
            lambda: d.run_of(job) and d.run_of(job)["state"] == "running",
            timeout=10,
            what="the Run to be running",
        )
        d.machine("input")
        frozen = time.monotonic()
        d.wait_run(job, "frozen", timeout=30)
        time.sleep(max(0.0, 40 - (time.monotonic() - frozen)))  # the freeze's length itself
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=180)
        [run] = j["runs"]
        assert run["outcome"] == "succeeded" and run["last_message"] == TEXT
        assert j["attempts_left"] == j["attempts"]
        assert len(stub.turns()) == 1  # carried on: the stream was not asked for again
