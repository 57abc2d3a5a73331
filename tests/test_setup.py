"""Setting up a Job's worktree never holds up the engine, and a setup that
fails leaves nothing half-made: the Job is blocked with the reason.

git is made slow (as a large checkout or a slow post-checkout hook makes it)
by a `git` earlier on the daemon's PATH that sleeps after `worktree add`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psutil

from owlproc import OwlDaemon, make_project, wait_for
from support.slowgit import SlowGit


def branches(project: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(project), "branch", "--list", "--format=%(refname:short)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def sleepers(folder: Path) -> list[psutil.Process]:
    """The slow git's sleeps still running (its `slow` file in their parent's script)."""
    out = []
    for p in psutil.process_iter(["name", "environ"]):
        try:
            if (
                p.info["name"] == "sleep"
                and "OWL_GIT" in (p.info["environ"] or {})
                and str(folder) in (p.info["environ"] or {}).get("PATH", "")
            ):
                out.append(p)
        except psutil.Error:
            continue
    return out


def daemon(
    tmp_path: Path, slow: SlowGit, config: dict | None = None, env: dict | None = None
) -> OwlDaemon:
    return OwlDaemon(tmp_path / "home", config or {}, env={"PATH": slow.path(), **(env or {})})


def timed(d: OwlDaemon, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    t = time.monotonic()
    p = d.owl(*args)
    return time.monotonic() - t, p


def test_input_freezes_a_run_while_another_job_s_setup_hangs(tmp_path):
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    d = daemon(tmp_path, slow, {"runs": {"max_parallel": 2}})
    with d:
        first = d.add("tick=0.2 sleep=120", project)
        d.machine("idle")
        d.wait_run(first, "running")
        slow.slow(60)
        second = d.add("sleep=60", project)
        wait_for(lambda: sleepers(slow.folder), what="the second setup to hang in git")
        # the engine is free: input freezes the first Run at once
        t = time.monotonic()
        d.machine("input")
        d.wait_run(first, "frozen", timeout=2)
        assert time.monotonic() - t < 1.5
        # every verb answers, and one that cannot act now says so in words
        took, p = timed(d, "status")
        assert p.returncode == 0 and took < 2.0, took
        took, p = timed(d, "jobs", "drop", str(second))
        assert p.returncode == 1 and took < 2.0
        assert p.stderr.strip() == f"owl: job {second} is being set up; try again in a moment"
        took, p = timed(d, "pause")
        assert p.returncode == 0 and took < 2.0
        assert "being set up" in d.status()["waiting"] or d.status()["waiting"] == "paused"
        # a daemon stop ends the setup too, and leaves nothing of it
        t = time.monotonic()
        assert d.stop() == 0
        assert time.monotonic() - t < 8
    wait_for(lambda: not sleepers(slow.folder), timeout=5, what="the setup's git to end")
    assert f"owl/job-{second}" not in branches(project)
    assert not (d.home / "worktrees" / f"job-{second}").exists()


def test_a_git_timeout_blocks_the_job_and_leaves_nothing_half_made(tmp_path):
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, slow, env={"OWL_GIT_TIMEOUT": "2"}) as d:
        slow.slow(30)
        job = d.add("sleep=60", project)
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=15)
        assert "ran longer than 2 s" in j["reason"], j["reason"]
        assert j["branch"] is None and j["worktree"] is None
        assert f"owl/job-{job}" not in branches(project)
        assert not (d.home / "worktrees" / f"job-{job}").exists()
        wait_for(lambda: not sleepers(slow.folder), timeout=5, what="git's processes ended")
        assert "internal error" not in d.log_text()
        # once git is quick again, the same names are used (no job-N-2)
        slow.slow(None)
        d.ok("jobs", "extend", str(job))
        run = d.wait_run(job, "running", timeout=15)
        assert run and d.job(job)["branch"] == f"owl/job-{job}"
        assert d.stop() == 0


def test_git_missing_blocks_the_job_in_words(tmp_path):
    slow = SlowGit(tmp_path / "bin", alone=True)
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, slow) as d:
        job = d.add("sleep=60", project)
        slow.hide_git()
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=15)
        assert "git" in j["reason"] and "setup failed" in j["reason"], j["reason"]
        assert "internal error" not in d.log_text()
        assert d.owl("status").returncode == 0
        assert d.stop() == 0


def test_a_vanished_project_blocks_the_job(tmp_path):
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, slow) as d:
        job = d.add("sleep=60", project)
        project.rename(tmp_path / "moved")
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=15)
        assert str(project) in j["reason"], j["reason"]
        assert not (d.home / "worktrees" / f"job-{job}").exists()
        assert d.stop() == 0


def test_a_slow_failing_post_checkout_hook_never_runs(tmp_path):
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    hook = project / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\nsleep 75\nexit 1\n")
    hook.chmod(0o755)
    with daemon(tmp_path, slow) as d:
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running", timeout=10)
        assert not (tmp_path / "hook-ran").exists()
        assert d.stop() == 0


def setups_recorded(home: Path) -> str | None:
    with sqlite3.connect(f"file:{home / 'owl.db'}?mode=ro", uri=True, timeout=5) as db:
        row = db.execute("SELECT value FROM settings WHERE key='setups'").fetchone()
    return row[0] if row and row[0] not in ("null", "{}") else None


def test_a_crash_mid_setup_is_cleaned_up(tmp_path):
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    d = daemon(tmp_path, slow)
    with d:
        slow.slow(60)
        job = d.add("sleep=60", project)
        d.machine("idle")
        wait_for(lambda: sleepers(slow.folder), what="the setup to hang after git made it")
        assert setups_recorded(d.home)
        assert f"owl/job-{job}" in branches(project)  # half made
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(5)
        # the watchdog ends the setup's git and removes what it made
        wait_for(lambda: not sleepers(slow.folder), timeout=15, what="the setup's git ended")
        wait_for(
            lambda: f"owl/job-{job}" not in branches(project),
            timeout=15,
            what="the half-made branch removed",
        )
        assert not (d.home / "worktrees" / f"job-{job}").exists()
        slow.slow(None)
        d.start()
        assert setups_recorded(d.home) is None
        assert d.job(job)["state"] == "pending"
        d.machine("idle")
        d.wait_run(job, "running", timeout=15)
        assert d.job(job)["branch"] == f"owl/job-{job}"
        assert d.stop() == 0


def test_setups_at_once_in_one_project_never_break_each_other(tmp_path):
    """`git worktree prune` removes the folder of an add under way; Owl's
    adds, removes and prunes in one project take turns, so none fails."""
    import threading

    from owl.git import storing

    for trial in range(4):
        project = make_project(tmp_path / f"proj{trial}")
        errors: list[str] = []

        def one(job_id: int) -> None:
            try:
                storing.ensure(project, job_id, "owl/", tmp_path / f"wt{trial}")
            except Exception as e:  # what a setup would block its Job with
                errors.append(str(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        assert sorted(branches(project)) == sorted(["main"] + [f"owl/job-{i}" for i in range(1, 9)])


def test_a_branch_another_setup_is_making_is_not_blamed_on_a_run(tmp_path):
    """A Run ends while another Job's setup has made its branch but not yet
    handed it to the engine: that branch is Owl's, not the agent's doing."""
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    d = daemon(tmp_path, slow, {"runs": {"max_parallel": 2}})
    with d:
        first = d.add("sleep=3 exit=0", project)
        d.machine("idle")
        d.wait_run(first, "running")
        slow.slow(30)
        second = d.add("sleep=60", project)
        wait_for(lambda: sleepers(slow.folder), what="the second setup to hang after its add")
        assert f"owl/job-{second}" in branches(project)
        j = wait_for(
            lambda: (
                (x := d.job(first))["runs"][0]["outcome"]
                and x["runs"][0].get("outside") is not None
                and x
            ),
            timeout=20,
            what="the first Run's end compared",
        )
        assert j["runs"][0]["outside"] == [], j["runs"][0]["outside"]
        slow.slow(None)
        for s in sleepers(slow.folder):
            s.kill()


def test_owl_start_on_a_job_being_set_up_starts_it_when_ready(tmp_path):
    """The machine's own start was setting the Job up when the person came back
    and said `owl start`: its Run starts once the worktree is ready, as
    `owl start` starts one (input does not freeze it), not "try again"."""
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, slow) as d:
        slow.slow(3)
        job = d.add("tick=0.2 sleep=60", project)
        d.machine("idle")
        wait_for(lambda: sleepers(slow.folder), what="the setup to hang in git")
        d.machine("input")
        p = d.owl("start")
        assert p.returncode == 0, p.stderr
        assert f"job {job} is being set up; its Run starts when it is ready" in p.stdout, p
        run = d.wait_run(job, "running", timeout=20)
        d.machine("input")  # taken by the engine before the status below
        assert d.status()["runs"][0]["state"] == "running", run
        d.ok("stop", "--force")
