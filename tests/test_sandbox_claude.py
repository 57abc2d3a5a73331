"""The real Claude Code CLI inside the sandbox (own network, the stub's port kept):
its Bash tool works in the worktree, and the escapes it tries are refused."""

import os
import subprocess

import pytest
from owl.sandbox import contain, policy
from support.anthropic_stub import AnthropicStub, Bash, Text
from support.claude import require_claude
from support.need import programs as need

pytestmark = pytest.mark.claude

ESCAPES = (
    "cat ~/.ssh/id_ed25519 || echo REFUSED-ssh; echo x >> ~/.bashrc || echo REFUSED-bashrc; "
    "kill -0 {daemon} || echo REFUSED-pid; echo token=$GITHUB_TOKEN display=$DISPLAY; "
    "echo done > work.txt && echo WORKED"
)


def test_claude_runs_contained_and_its_escapes_are_refused(tmp_path):
    need("bwrap", "pasta")
    claude = require_claude()
    home, wt = tmp_path / "home", tmp_path / "wt"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# mine\n")
    wt.mkdir()
    script = [Bash(ESCAPES.format(daemon=os.getpid())), Text("Tried.")]
    with AnthropicStub(script) as stub:
        env = dict(
            os.environ, **stub.env(home), GITHUB_TOKEN="ghp_secret", DISPLAY=":0", IS_SANDBOX="1"
        )
        w = contain.wrap(
            [
                claude,
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--",
                "try",
            ],
            settings=policy.Settings(),
            agent="claude",
            env=env,
            worktree=str(wt),
            project=str(wt),
            owl_dirs=[],
        )
        assert w.label.endswith("own network; unix sockets: none")
        done = subprocess.run(
            w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=120, check=False
        )
    out = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    for word in ("REFUSED-ssh", "REFUSED-bashrc", "REFUSED-pid", "token= display=", "WORKED"):
        assert word in out, word
    assert "PRIVATE KEY" not in out
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert (wt / "work.txt").read_text() == "done\n"


def test_claude_s_own_settings_base_url_and_api_key_helper_work_contained(tmp_path):
    """~/.claude/settings.json points Claude at its provider (`env`'s
    ANTHROPIC_BASE_URL, a port of the host's 127.0.0.1 that only that file
    names) and gets its key from `apiKeyHelper`, a command Claude runs inside
    the sandbox: both work there, with nothing in Owl's config."""
    import json

    need("bwrap", "pasta")
    claude = require_claude()
    home, wt = tmp_path / "home", tmp_path / "wt"
    (home / "bin").mkdir(parents=True)
    helper = home / "bin" / "key.sh"
    helper.write_text("#!/bin/sh\necho sk-from-the-helper\n")
    helper.chmod(0o755)
    wt.mkdir()
    with AnthropicStub([Bash("echo done > work.txt && echo WORKED"), Text("Done.")]) as stub:
        env = dict(os.environ, **stub.env(home), IS_SANDBOX="1")
        for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
            env.pop(name)
        (home / ".claude").mkdir()
        (home / ".claude" / "settings.json").write_text(
            json.dumps({"apiKeyHelper": str(helper), "env": {"ANTHROPIC_BASE_URL": stub.url}})
        )
        w = contain.wrap(
            [claude, "-p", "--output-format", "stream-json", "--verbose"]
            + ["--dangerously-skip-permissions", "--", "work"],
            settings=policy.Settings(),
            agent="claude",
            env=env,
            worktree=str(wt),
            project=str(wt),
            owl_dirs=[],
        )
        assert w.label.endswith("own network; unix sockets: none")
        done = subprocess.run(
            w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=120, check=False
        )
        keys = {r.headers.get("x-api-key") for r in stub.requests if "/messages" in r.path}
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert "WORKED" in done.stdout
    assert keys == {"sk-from-the-helper"}
    assert (wt / "work.txt").read_text() == "done\n"
