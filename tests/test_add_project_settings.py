"""`owl add` reads the project's committed `.owl.toml` once per commit: Jobs
queued one after another in a project wait on one git, and a new commit's
settings are in force for the next Job at once (through the real daemon)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from owlproc import AGENT, OwlDaemon, make_project


def commit(project: Path, name: str, text: str | None) -> None:
    path = project / name
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-q", "-m", name], check=True)


def test_each_commit_s_settings_are_in_force_for_the_next_job(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    other = {"other": {"command": [sys.executable, AGENT, "{prompt}"]}}
    with OwlDaemon(tmp_path / "home", {"agents": other}) as d:
        d.machine("input")  # nothing starts
        agent_of = lambda: d.job(d.add("sleep=60", project))["agent"]  # noqa: E731
        assert agent_of() == "script"  # the default
        assert agent_of() == "script"  # the same commit again
        commit(project, ".owl.toml", 'agent = "other"\n')
        assert agent_of() == "other"
        assert agent_of() == "other"
        commit(project, ".owl.toml", "agent = 3\n")
        for _ in range(2):  # a wrong file is refused each time, never kept
            p = d.owl("add", "--project", str(project), "sleep=60")
            assert p.returncode == 1
            assert p.stderr.strip() == (
                f"owl: {project / '.owl.toml'} (as committed on HEAD): agent = 3: "
                "must be an agent's name"
            )
        commit(project, ".owl.toml", None)
        assert agent_of() == "script"
        sub = project / "deep" / "er"
        sub.mkdir(parents=True)
        assert d.add("sleep=60", sub) > 0  # from a folder inside, the top's settings
