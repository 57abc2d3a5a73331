"""An agent's headless credential held by Owl, with the REAL Claude Code CLI.

``claude setup-token``'s token kept in Owl's ``credentials`` folder (``claude``, beside
``config.toml``, mode 0600) signs a contained Claude Run in, the daemon's own
environment holding no credential at all: the stub sees the token as the
CLI's bearer. This is how Claude Code logs in on a Mac, where a contained Run
cannot read the login keychain's file."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.anthropic_stub import AnthropicStub, Bash, Text

from owlproc import make_project
from test_claude_limits import COMMIT, claude_daemon

pytestmark = pytest.mark.claude


def test_a_held_oauth_token_signs_the_run_in(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with AnthropicStub([Bash(COMMIT), Text("Committed.")]) as stub:
        d = claude_daemon(tmp_path, stub, oauth=True)
        d.env.pop("CLAUDE_CODE_OAUTH_TOKEN")  # the daemon's environment holds none
        held = tmp_path / "owl" / "credentials"
        held.mkdir(parents=True, mode=0o700)
        token = held / "claude"  # passed as CLAUDE_CODE_OAUTH_TOKEN
        token.write_text("sk-ant-oat01-held-by-owl\n")
        token.chmod(0o600)
        with d:
            job = d.add("Add a hello file and commit it.", project)
            d.machine("idle")
            j = d.wait_job(job, "review", timeout=120)
        assert j["runs"][0]["outcome"] == "succeeded"
        bearers = [
            {k.lower(): v for k, v in r.headers.items()}.get("authorization")
            for r in stub.main_requests()
        ]
        assert bearers and set(bearers) == {"Bearer sk-ant-oat01-held-by-owl"}, bearers
