"""An agent's own provider setup works contained, and one that cannot work is a
setup problem, not three spent attempts. Through the real daemon and real bwrap
(and pasta); Codex is the real CLI against the Responses API stub on 127.0.0.1.

A Codex pointed at a local provider only in its `config.toml` (as for Ollama,
OpenRouter or Azure: `[model_providers.x] base_url`, `env_key`) reaches review
contained with nothing in Owl's config: the provider's port stays reachable
from the Run's own network, and its key variable is passed although its name
looks secret. Without that variable Codex says "Missing environment variable",
and the Job is blocked once with the reason and the hint, its attempts whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project
from support import responses_stub
from support.agent_clis import require
from support.need import programs
from support.scripted_http import Say, Shell

COMMIT = "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo ok"
KEY = "LOCAL_LLM_API_KEY"  # a name that looks secret: dropped unless the agent's own


def provider_config(url: str) -> str:
    """A person's own config.toml: a custom provider on 127.0.0.1, its key's name."""
    return (
        f'model = "{responses_stub.MODEL}"\nmodel_provider = "local"\n'
        '[model_providers.local]\nname = "local"\n'
        f'base_url = "{url}/v1"\nenv_key = "{KEY}"\nwire_api = "responses"\n'
    )


def codex_daemon(tmp_path: Path, stub: responses_stub.ResponsesStub, env: dict) -> OwlDaemon:
    home = tmp_path / "person"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(provider_config(stub.url))
    return OwlDaemon(
        tmp_path / "owl",
        {"sandbox": {"mode": "required"}, "agents": {"codex": {"path": require("codex")}}},
        env={"HOME": str(home), "CODEX_HOME": str(codex_home), "NO_COLOR": "1", **env},
    )


@pytest.mark.agent_clis
def test_a_codex_with_its_own_local_provider_reaches_review_contained(tmp_path):
    programs("bwrap", "pasta")
    project = make_project(tmp_path / "proj")
    with (
        responses_stub.ResponsesStub([Shell(COMMIT), Say("Committed hello.txt.")]) as stub,
        codex_daemon(tmp_path, stub, {KEY: "sk-local", "GITHUB_TOKEN": "ghp_x"}) as d,
    ):
        job = d.add("Add a hello file and commit it.", project, "--agent", "codex")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=120)
        runs = [(r["id"], r["outcome"], r["ended_by"], r["reason"]) for r in j["runs"]]
        assert len(runs) == 1, (runs, d.told_so_far(job))
        [run] = j["runs"]
        assert run["contained"].startswith("contained: bwrap"), run["contained"]
        assert "own network" in run["contained"]
        assert run["last_message"] == "Committed hello.txt."
        # (without its key Codex would not have asked: see the next test)
        assert len(stub.turns()) == 2


@pytest.mark.agent_clis
def test_a_codex_missing_its_providers_key_is_blocked_once_spending_nothing(tmp_path):
    programs("bwrap")
    project = make_project(tmp_path / "proj")
    with (
        responses_stub.ResponsesStub([Say("never asked")]) as stub,
        codex_daemon(tmp_path, stub, {}) as d,
    ):
        job = d.add("Say done.", project, "--agent", "codex")
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=90)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted"]
        assert j["attempts_left"] == 3
        assert j["reason"].startswith(
            f"codex could not start: missing environment variable {KEY}; "
        )
        assert f'sandbox.env_keep = ["{KEY}"]' in j["reason"]
        assert stub.turns() == []


def test_a_command_agent_refused_by_its_local_port_is_blocked_with_the_hint(tmp_path):
    project = make_project(tmp_path / "proj")
    said = "Error: connect ECONNREFUSED 127.0.0.1:11434"
    with OwlDaemon(
        tmp_path / "owl",
        {
            "agents": {"mine": {"command": ["sh", "-c", f"echo '{said}' >&2; exit 1"]}},
            "agent": {"default": "mine"},
        },
    ) as d:
        job = d.add("Say done.", project)
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=30)
        assert j["attempts_left"] == 3 and len(j["runs"]) == 1
        assert j["reason"].startswith("mine could not start: could not connect to 127.0.0.1:11434")
        assert "sandbox.host_ports = [11434]" in j["reason"]
        shown = d.ok("jobs", "show", str(job))
        assert "sandbox.host_ports = [11434]" in shown


@pytest.mark.parametrize("mode", ["off", "required"])
def test_an_agent_program_that_is_not_there_is_blocked_once_spending_nothing(tmp_path, mode):
    if mode == "required":
        programs("bwrap")
    project = make_project(tmp_path / "proj")
    with OwlDaemon(
        tmp_path / "owl",
        {
            "agents": {"mine": {"command": ["{worktree}/no-such-agent", "{prompt}"]}},
            "agent": {"default": "mine"},
            "sandbox": {"mode": mode},
        },
        env={"AGENT_PIDS": ""},
    ) as d:
        job = d.add("Say done.", project)
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=30)
        assert j["attempts_left"] == 3 and len(j["runs"]) == 1, j
        assert "no-such-agent" in j["reason"]
        assert "install it, or check agents.mine.path or its command" in j["reason"]
