"""aider as a built-in agent, the REAL aider, through the real daemon.

aider (PyPI aider-chat, installed by tools/install-agents.sh into its own
venv) talks to a local chat-completions stub on 127.0.0.1 (`chat_stub`:
OPENAI_API_BASE, `AIDER_MODEL=openai/stub-model`, its prices in
~/.aider.model.metadata.json). The agent is named only (`--agent aider`).

A rate limit or a 5xx is retried by aider for about a minute (0.25 s
doubling to 32 s, each try retried by the OpenAI client as well) before it
gives up: those tests run the same aider with its clock's sleeps 100 times shorter (a
`sitecustomize` on the PYTHONPATH of a wrapper that execs it), so it ends in
seconds with every request, retry and word of the real one. The recording
of a full-length run is tests/support/streams/aider-limit.txt.

Without aider these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from owlproc import OwlDaemon, make_project, wait_for
from support.agent_clis import require
from support.chat_agents import waits_out_a_rate_limit
from support.chat_stub import ChatStub, RateLimit, Say, ServerError, whole

pytestmark = pytest.mark.agent_clis

HELLO = whole("hello.txt", "hello\n", "I will add hello.txt.")
FAST_SLEEP = """\
import time

_sleep = time.sleep


def _shorter(seconds):
    _sleep(max(0.0, seconds) / 100)


time.sleep = _shorter
"""


def aider_daemon(tmp_path: Path, stub: ChatStub, path: str | None = None) -> OwlDaemon:
    """A daemon with aider against `stub`, every Run contained (the default
    mode's, required here): its key passed although its name looks secret,
    the stub's port reachable from the Run's own network, the person's
    ~/.aider.model.metadata.json copied into the Run's own home."""
    env = stub.env(tmp_path / "user-home")
    (tmp_path / "fast-sleep").mkdir(exist_ok=True)
    # A wrapper (`fast_aider`) is the command Owl sees: what it runs, the real
    # aider's install and its sitecustomize (under /tmp, which a contained Run
    # sees as a folder of its own), are named for the Run to read, as a
    # person's own wrapper would need.
    install = str(Path(require("aider")).parent.parent)
    cfg = {
        "agents": {"aider": {"path": path or require("aider")}},
        "sandbox": {"mode": "required", "read": [install, str(tmp_path / "fast-sleep")]},
        # aider's start (litellm's import) is seconds of CPU: at Owl's own
        # priority (nice 10, its session's autogroup) it gets a tenth of a
        # core's share against each busy session of this shared machine, and
        # takes minutes. The priority is test_priority.py's to test.
        "runs": {"nice": 0},
    }
    return OwlDaemon(tmp_path / "owl", cfg, env=env)


def fast_aider(tmp_path: Path) -> str:
    """A wrapper that execs the real aider with its sleeps 100 times shorter."""
    site = tmp_path / "fast-sleep"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(FAST_SLEEP)
    wrapper = tmp_path / "aider-fast"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{require("aider")}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_a_job_reaches_review_with_its_commit_and_cost(tmp_path):
    project = make_project(tmp_path / "proj")
    with ChatStub([Say(HELLO)]) as stub, aider_daemon(tmp_path, stub) as d:
        job = d.add("Add a hello file and commit it.", project, "--agent", "aider")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=180)
        [run] = j["runs"]
        assert run["outcome"] == "succeeded" and run["session_id"] is None
        assert run["contained"].startswith("contained: bwrap"), run["contained"]
        assert run["last_message"] == "I will add hello.txt."
        # "Tokens: 1.2k sent, 56 received. Cost: $0.0018 message, $0.0018 session."
        assert run["usage"]["input_tokens"] == 1200 and run["usage"]["output_tokens"] == 56
        assert run["usage"]["total_cost_usd"] == pytest.approx(0.0018)
        log = d.ok("logs", str(job), "--run", str(run["id"]))
        assert "Applied edit to hello.txt" in log and "Commit " in log
        shown = d.ok("jobs", "show", str(job))
        assert "Add hello.txt" in shown and run["contained"] in shown
        # aider's own files are the project's, in Owl's keeping; the person's
        # home holds what it held
        [kept] = (tmp_path / "owl" / "sandbox" / "projects").glob("*/agents/aider-*")
        assert any(kept.glob("aider-*")), sorted(kept.iterdir())
        assert [p.name for p in (tmp_path / "user-home").iterdir()] == [
            ".aider.model.metadata.json"
        ]
        # the prompt reached the model whole, with Owl's contract
        first = stub.turns()[0].text()
        assert "Add a hello file and commit it." in first and "running unattended" in first
        # aider's own files stay out of git: no .gitignore line left uncommitted
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=j["worktree"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert status == ""


def test_a_rate_limit_is_a_wait_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with (
        ChatStub([RateLimit(times=1000)]) as stub,
        aider_daemon(tmp_path, stub, fast_aider(tmp_path)) as d,
    ):
        # the provider's "Please try again in 7m12s.", passed through by aider
        j = waits_out_a_rate_limit(d, project, "aider", 200)
        # aider gave up after its own retries (9 tries, each retried by the client)
        assert len(stub.turns()) >= 9 and len(j["runs"]) == 1
        log = d.ok("logs", str(j["id"]), "--run", str(j["runs"][0]["id"]))
        assert "Retrying in 32.0 seconds" in log and "rate limited you" in log


def test_the_service_failing_is_a_backoff_that_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with (
        ChatStub([ServerError(times=1000)]) as stub,
        aider_daemon(tmp_path, stub, fast_aider(tmp_path)) as d,
    ):
        job = d.add("Say done.", project, "--agent", "aider", "--attempts", "1")
        d.machine("idle")
        j = wait_for(
            lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
            90,
            what="the first Run to end",
        )
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith("aider's model service failed (server error); trying")
        assert j["attempts_left"] == 1
        [w] = d.status()["limits"]
        assert w["agent"] == "aider"
        log = d.ok("logs", str(job), "--run", str(first["id"]))
        assert "litellm.InternalServerError" in log and "down or overloaded" in log


def test_the_next_run_restores_the_chat(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Say(HELLO), Say(whole("bye.txt", "bye\n", "Added bye.txt too."))]
    with ChatStub(script) as stub, aider_daemon(tmp_path, stub) as d:
        job = d.add("Add a hello file and commit it.", project, "--agent", "aider")
        d.machine("idle")
        d.wait_job(job, "review", timeout=180)
        d.ok("jobs", "reply", str(job), "Please also add a bye file.")
        j = d.wait_job(job, "review", timeout=180)
        first, second = j["runs"]
        assert second["outcome"] == "succeeded" and second["last_message"] == "Added bye.txt too."
        assert j["attempts_left"] == j["attempts"]
        later = stub.turns()[-1].text()
        # --restore-chat-history: the first Run's exchange, then the new prompt
        assert later.index("I will add hello.txt.") < later.index("Please also add a bye file.")
        shown = d.ok("jobs", "show", str(job))
        assert "Add hello.txt" in shown and "Add bye.txt" in shown
        assert second["usage"]["total_cost_usd"] == pytest.approx(0.0018)
