"""`owl jobs drop --force` removes the worktree and branch only once every
process of the Run is gone: an agent that traps SIGTERM may still be writing
(or committing) in its 5 s."""

from __future__ import annotations

import subprocess
from pathlib import Path

from owlproc import OwlDaemon, make_project, wait_for


def branches(project: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(project), "branch", "--list"], check=True, capture_output=True, text=True
    ).stdout


def test_drop_force_keeps_the_worktree_until_the_run_s_tree_is_gone(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("trap-term setsid-child=60 tick=0.2 sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(lambda: len(d.alive_agent_pids()) == 2, what="the agent and its child")
        j = d.job(job)
        worktree, branch = Path(j["worktree"]), j["branch"]
        out = d.json("jobs", "drop", str(job), "--force")
        assert out["state"] == "cancelled"
        # TERM is ignored: for ~5 s the processes live on, and so do their files
        seen_alive = 0
        while d.alive_agent_pids():
            assert worktree.is_dir(), "the worktree went while the Run still had processes"
            assert branch in branches(project)
            seen_alive += 1
        assert seen_alive > 3
        wait_for(
            lambda: not worktree.exists() and branch not in branches(project),
            timeout=5,
            what="the worktree and branch removed after the Run",
        )
        assert d.job(job)["runs"][0]["ended_by"] == "sigkill"
