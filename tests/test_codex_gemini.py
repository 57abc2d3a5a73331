"""Codex and Gemini as built-in agents, with the REAL CLIs, through the real daemon.

Each CLI runs against a local stub of its model API on 127.0.0.1 (Codex: a
model provider in $CODEX_HOME/config.toml whose base_url is the Responses
API stub; Gemini: GOOGLE_GEMINI_BASE_URL at a `streamGenerateContent` stub),
scripted per request. The agents are named only (`--agent codex`): no
command template. The service failing (5xx) is read from recorded output in
test_agent_streams.py, not waited for here: Codex retries it about 25 s and
Gemini about 4 minutes before saying so.

Without the CLIs these tests fail (tools/install-agents.sh installs them).
"""

from __future__ import annotations

import urllib.parse

import time
from pathlib import Path
from typing import Any

import pytest
from owlproc import OwlDaemon, make_project, wait_for

from owl.rules import jobrules
from support import gemini_stub, responses_stub
from support.agent_clis import require
from support.scripted_http import Say, Shell, Stub

pytestmark = pytest.mark.agent_clis

COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)
AGENTS = ["codex", "gemini"]


def stub_for(agent: str, script: list[Any]) -> Stub:
    return (
        responses_stub.ResponsesStub(script) if agent == "codex" else gemini_stub.GeminiStub(script)
    )


def limit_turn(agent: str) -> Any:
    return responses_stub.UsageLimit(3600) if agent == "codex" else gemini_stub.DailyQuota(3596)


def agent_daemon(tmp_path: Path, agent: str, stub: Stub, config: dict | None = None) -> OwlDaemon:
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    env = stub.env(home / ".codex") if agent == "codex" else stub.env(home)
    # Contained, as a person's Runs are: limits, resumes and handoffs hold inside.
    # Codex is pointed at its provider by its own config.toml, not a variable
    # Owl reads: the stub's port is kept reachable as a person would keep a
    # local provider's, with sandbox.host_ports.
    sandbox: dict = {"mode": "required"}
    if agent == "codex":
        sandbox["host_ports"] = [urllib.parse.urlsplit(stub.url).port]
    cfg: dict = {"agents": {agent: {"path": require(agent)}}, "sandbox": sandbox}
    for k, v in (config or {}).items():
        cfg.setdefault(k, {}).update(v)
    return OwlDaemon(tmp_path / "owl", cfg, env=env)


def first_ended(d: OwlDaemon, job: int, timeout: float = 60.0) -> dict:
    return wait_for(
        lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
        timeout,
        what=f"job {job}'s first Run to end",
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_a_job_reaches_review_with_its_commit_and_usage(tmp_path, agent):
    project = make_project(tmp_path / "proj")
    with (
        stub_for(agent, [Shell(COMMIT), Say("Committed hello.txt.")]) as stub,
        agent_daemon(tmp_path, agent, stub) as d,
    ):
        job = d.add("Add a hello file and commit it.", project, "--agent", agent)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=90)
        [run] = j["runs"]
        assert run["outcome"] == "succeeded" and run["session_id"]
        assert run["last_message"] == "Committed hello.txt."
        assert run["usage"]["input_tokens"] > 0 and run["usage"]["output_tokens"] > 0
        log = d.ok("logs", str(job), "--run", str(run["id"]))
        assert "committed" in log and f"● {agent}" in log
        shown = d.ok("jobs", "show", str(job))
        assert "Add hello" in shown
        # the prompt reached the model whole, with Owl's contract
        assert "Add a hello file and commit it." in stub.turns()[0].text()


@pytest.mark.parametrize("agent", AGENTS)
def test_a_usage_limit_is_a_wait_that_spends_no_attempt(tmp_path, agent):
    project = make_project(tmp_path / "proj")
    with stub_for(agent, [limit_turn(agent)]) as stub, agent_daemon(tmp_path, agent, stub) as d:
        job = d.add("Say done.", project, "--agent", agent, "--attempts", "1")
        d.machine("idle")
        began = time.time()
        j = first_ended(d, job)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith(f"{agent}'s usage limit; resets "), first["reason"]
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        [w] = d.status()["limits"]
        assert w["agent"] == agent
        # Codex says the minute ("try again at 9:50 PM."), Gemini the second ("retry in 3596s")
        assert 3596 - 70 <= w["until_epoch"] - began <= 3600 + (time.time() - began)
        assert first["reason"].endswith(jobrules.at_words(w["until_epoch"], time.time(), None))
        assert len(stub.turns()) == 1 and len(d.job(job)["runs"]) == 1


@pytest.mark.parametrize("agent", AGENTS)
def test_a_run_killed_mid_tool_is_resumed_in_the_same_conversation(tmp_path, agent):
    project = make_project(tmp_path / "proj")
    script = [Shell("echo start; sleep 30; echo x > late.txt"), Say("Carried on.")]
    with (
        stub_for(agent, script) as stub,
        agent_daemon(tmp_path, agent, stub, {"interruption": {"grace_window": "1s"}}) as d,
    ):
        job = d.add("Add a --verbose flag.", project, "--agent", agent)
        d.machine("idle")
        wait_for(
            lambda: (
                stub.turns_served >= 1
                and any("sleep" in " ".join(p) for p in _cmdlines(d.run_of(job)["pids"]))
            ),
            timeout=60,
            what=f"{agent}'s shell tool to be running",
        )
        d.machine("input")
        j = d.wait_job(job, "pending", timeout=30)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and first["session_id"]
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=90)
        second = j["runs"][1]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        assert j["attempts_left"] == j["attempts"]
        later = stub.turns()[-1].text()
        # the resumed conversation carries the first Run's prompt, then Owl's short message
        assert later.index("Add a --verbose flag.") < later.index("grace window")
        if agent == "codex":
            # Codex re-sends the tool call the kill cut short; Gemini 0.61 keeps the
            # session but drops a call that never got its result (as measured).
            assert "sleep 30" in later


def _cmdlines(pids: list[int]) -> list[list[str]]:
    import psutil

    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid).cmdline())
        except psutil.Error:
            pass
    return out


def test_gemini_carries_on_while_codex_waits_and_the_job_reaches_review(tmp_path):
    project = make_project(tmp_path / "proj")
    home = tmp_path / "user-home"
    with (
        responses_stub.ResponsesStub([limit_turn("codex")]) as codex,
        gemini_stub.GeminiStub([Shell(COMMIT), Say("Committed hello.txt.")]) as gemini,
    ):
        env = {**codex.env(home / ".codex"), **gemini.env(home)}
        cfg = {
            "agents": {"codex": {"path": require("codex")}, "gemini": {"path": require("gemini")}}
        }
        with OwlDaemon(tmp_path / "owl", cfg, env=env) as d:
            job = d.add(
                "Add a hello file and commit it.",
                project,
                "--agent",
                "codex,gemini",
                "--attempts",
                "1",
            )
            d.machine("idle")
            j = d.wait_job(job, "review", timeout=90)
            assert [(r["agent"], r["outcome"]) for r in j["runs"]] == [
                ("codex", "interrupted"),
                ("gemini", "succeeded"),
            ]
            assert j["attempts_left"] == 1
            assert j["runs"][1]["session_id"] != j["runs"][0]["session_id"]
            assert "Add hello" in d.ok("jobs", "show", str(job))
            # gemini started fresh, with the Job's own prompt
            assert "Add a hello file and commit it." in gemini.turns()[0].text()
            assert [w["agent"] for w in d.status()["limits"]] == ["codex"]


def test_a_reply_resumes_codex_and_its_usage_is_the_runs_own(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Added the goodbye too.")]
    with stub_for("codex", script) as stub, agent_daemon(tmp_path, "codex", stub) as d:
        job = d.add("Add a hello file and commit it.", project, "--agent", "codex")
        d.machine("idle")
        d.wait_job(job, "review", timeout=90)
        d.ok("jobs", "reply", str(job), "Please also add a goodbye file.")
        j = d.wait_job(job, "review", timeout=90)
        first, second = j["runs"]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        assert "Please also add a goodbye file." in stub.turns()[-1].text()
        # Codex counts over the whole thread; each Run is given only its own tokens
        assert first["usage"]["input_tokens"] == 200
        assert second["usage"]["input_tokens"] == 100
        assert j["usage"]["input_tokens"] == 300


HANDOFF = (
    "mkdir -p .owl && echo 'Parser half done; next: the tests.' > .owl/HANDOFF.md"
    " && echo a > a.txt && git add a.txt && git commit -q -m 'Add a' && echo committed"
)
# What each CLI's own record of its conversations is, and what it says when
# that record is gone (as measured: Codex 0.171 exits 1 with no JSON at all).
# Where the CLI keeps its sessions: in Owl's keeping, the agent's state of
# this project (a contained Run never writes the person's own).
LOST = {
    "codex": ("sessions", "no rollout found for thread id"),
    "gemini": ("tmp", "Error resuming session"),
}


def kept_state(owl: Path, agent: str, name: str) -> Path:
    [found] = (owl / "sandbox" / "projects").glob(f"*/agents/{agent}-*/*/{name}")
    return found


@pytest.mark.parametrize("agent", AGENTS)
def test_a_conversation_the_cli_lost_starts_afresh_in_the_same_run(tmp_path, agent):
    import shutil

    project = make_project(tmp_path / "proj")
    script = [Shell(HANDOFF), Say("First done."), Say("Started afresh.")]
    with stub_for(agent, script) as stub, agent_daemon(tmp_path, agent, stub) as d:
        job = d.add("Say done.", project, "--agent", agent)
        d.machine("idle")
        d.wait_job(job, "review", timeout=90)
        # the CLI's own record of its sessions is gone: its resume is refused
        record, words = LOST[agent]
        shutil.rmtree(kept_state(tmp_path / "owl", agent, record))
        assert not (tmp_path / "user-home" / f".{agent}" / record).exists()
        served = stub.turns_served
        d.ok("jobs", "reply", str(job), "One more thing.")
        j = d.wait_job(job, "review", timeout=90)
        first, second = j["runs"]
        assert second["outcome"] == "succeeded" and second["resumed"] is False
        assert second["session_id"] and second["session_id"] != first["session_id"]
        assert second["last_message"] == "Started afresh."
        assert j["attempts_left"] == j["attempts"]
        log = d.ok("logs", str(job), "--run", str(second["id"]))
        assert "could not be resumed" in log and words in log
        # the model saw one request more: a fresh conversation (nothing of the
        # first Run's turns) carrying the handoff, the branch and the reply
        [fresh] = stub.turns()[served:]
        text = fresh.text()
        assert "First done." not in text and "echo committed" not in text
        assert "Parser half done; next: the tests." in text
        assert "Add a" in text and "One more thing." in text and "Say done." in text
