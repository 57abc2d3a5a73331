"""`owl agents` looks and runs nothing: a configured command agent is never
started to be asked its version, and a built-in CLI's version is read from its
package's own files (`owl.agents.version`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import tomli_w

from owl.agents import version
from owlproc import OWL, make_project
from support import agent_clis
from support.claude import require_claude

# What an agent's script might do when started as `SCRIPT --version` in the
# person's folder: leave a file, commit on the branch checked out there, and
# leave a process behind.
PLANTS = r"""#!/bin/sh
echo ran "$@" >> "$MARKS/ran"
echo planted > planted.txt
git add planted.txt && git commit -qm "planted by an agent asked its version"
setsid sleep 300 < /dev/null > /dev/null 2>&1 &
echo 9.9.9
"""


def owl_agents(home: Path, cwd: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [*OWL, "agents", "--json"],
        cwd=cwd,
        env={**os.environ, "OWL_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {a["name"]: a for a in json.loads(done.stdout)["agents"]}


def sleepers_of(marks: Path) -> list[psutil.Process]:
    """Processes the script would have left (a `sleep 300` under $MARKS's env)."""
    out = []
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if p.info["cmdline"] == ["sleep", "300"] and (p.info["environ"] or {}).get(
                "MARKS"
            ) == str(marks):
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_owl_agents_never_runs_a_command_agent(tmp_path):
    project = make_project(tmp_path / "calc")
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "agent.sh"
    script.write_text(PLANTS)
    script.chmod(0o755)
    home = tmp_path / "owl"
    home.mkdir()
    agents = {name: {"command": [str(script), "{prompt}"]} for name in ("mine", "other", "aider")}
    (home / "config.toml").write_text(tomli_w.dumps({"agents": agents}))
    head = subprocess.run(
        ["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    started = time.monotonic()
    listing = owl_agents(home, project, {"MARKS": str(marks)})
    assert time.monotonic() - started < 10
    for name in ("mine", "other", "aider"):
        row = listing[name]
        assert row["found"] and row["path"] == str(script) and row["version"] is None, row
    assert not (marks / "ran").exists()
    assert not (project / "planted.txt").exists()
    assert (
        subprocess.run(
            ["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout
        == head
    )
    assert sleepers_of(marks) == []


def npm_layout(prefix: Path, package: str, entry: str, ver: str) -> Path:
    """A CLI as `npm install -g --prefix PREFIX` lays it out: bin/NAME a symlink
    into lib/node_modules/PACKAGE, whose package.json names it."""
    root = prefix / "lib" / "node_modules" / package
    (root / Path(entry).parent).mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": package, "version": ver}))
    target = root / entry
    target.write_text('#!/bin/sh\necho ran >> "$MARKS/ran"\n')
    target.chmod(0o755)
    (prefix / "bin").mkdir()
    name = package.rsplit("/", 1)[-1].removesuffix("-cli").removesuffix("-code")
    link = prefix / "bin" / name
    link.symlink_to(os.path.relpath(target, link.parent))
    return link


def test_a_built_in_cli_version_is_read_from_its_package(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    codex = npm_layout(tmp_path / "codex", "@openai/codex", "bin/codex.js", "0.171.0")
    gemini = npm_layout(tmp_path / "gemini", "@google/gemini-cli", "bundle/gemini.js", "0.61.0")
    native = tmp_path / "share" / "claude" / "versions" / "2.1.332"
    native.parent.mkdir(parents=True)
    native.write_text('#!/bin/sh\necho ran >> "$MARKS/ran"\n')
    native.chmod(0o755)
    (tmp_path / "claude").symlink_to(native)
    home = tmp_path / "owl"
    home.mkdir()
    cfg = {
        "agents": {
            "codex": {"path": str(codex)},
            "gemini": {"path": str(gemini)},
            "claude": {"path": str(tmp_path / "claude")},
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(cfg))
    listing = owl_agents(home, tmp_path, {"MARKS": str(marks)})
    assert listing["codex"]["version"] == "0.171.0"
    assert listing["gemini"]["version"] == "0.61.0"
    assert listing["claude"]["version"] == "2.1.332"
    assert not (marks / "ran").exists()


def test_a_package_json_that_is_not_the_package_gives_no_version(tmp_path):
    link = npm_layout(tmp_path / "p", "@openai/codex", "bin/codex.js", "0.171.0")
    manifest = tmp_path / "p" / "lib" / "node_modules" / "@openai" / "codex" / "package.json"
    for text in ('{"name": "@openai/codex", "version": "1.0; rm -rf /"}', "not json", "[1]"):
        manifest.write_text(text)
        assert version.installed("codex", str(link)) is None
    manifest.write_text(json.dumps({"name": "@other/codex", "version": "1.0.0"}))
    assert version.installed("codex", str(link)) is None
    assert version.installed("mine", str(link)) is None


@pytest.mark.claude
def test_the_installed_clis_versions_are_read_without_running_them():
    """The real installs (npm's layout, aider's virtual environment)."""
    claude = require_claude()
    said = subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=30)
    assert version.installed("claude", claude) == said.stdout.split()[0]
    for name in ("codex", "gemini", "aider"):
        path = agent_clis.require(name)
        got = version.installed(name, path)
        assert got is not None and got[0].isdigit(), (name, path, got)
