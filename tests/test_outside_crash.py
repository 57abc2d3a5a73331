"""What an agent changed outside its branch is recorded even when the daemon dies mid-Run.

The real daemon runs a real agent script, uncontained (`sandbox.mode =
"off"`: contained, the project's `.git` is read only), that commits its work
in its worktree, moves the person's `main` and plants a hook in the project's
`.git`, then sleeps; the daemon is SIGKILLed
(its start-of-Run snapshot in memory is lost with it). The snapshot kept
beside the Run's log lets crash recovery compare all the same: the watchdog
when it outlives the daemon, the next start when it died too.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import psutil

from owlproc import OwlDaemon, make_project, wait_for

REACH = r"""
set -e
echo work > work.txt && git add work.txt && git commit -qm "the Job's work"
common=$PROJECT_GIT
G="git --git-dir=$common"
moved=$($G commit-tree "$($G rev-parse refs/heads/main:)" -p refs/heads/main -m "not the person's")
$G update-ref refs/heads/main "$moved"
printf '#!/bin/sh\nexit 0\n' > "$common/hooks/pre-push"
chmod +x "$common/hooks/pre-push"
exec sleep 60
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def watchdogs(home: Path) -> list[psutil.Process]:
    db = str(home / "owl.db")
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if "owl.daemon.watchdog" in (p.info["cmdline"] or [])
        and db in p.info["cmdline"]
        and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def kept(home: Path) -> list[str]:
    """The start-of-Run snapshots on disk (temp files of a write included)."""
    return sorted(p.name for p in (home / "logs").glob("*outside.json*"))


def db_outside(home: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{home / 'owl.db'}?mode=ro", uri=True, timeout=5) as db:
        return db.execute("SELECT id, outcome, outside FROM runs ORDER BY id").fetchall()


def reacher(tmp_path: Path) -> tuple[OwlDaemon, Path]:
    """A daemon (not started) whose agent moves main, plants a hook and sleeps."""
    project = make_project(tmp_path / "proj")
    d = OwlDaemon(
        tmp_path / "home",
        {
            "agents": {"reach": {"command": ["/bin/sh", "-c", REACH]}},
            "agent": {"default": "reach"},
            "sandbox": {"mode": "off"},
        },
        env={"PROJECT_GIT": str(project / ".git")},
    )
    return d, project


def reach(d: OwlDaemon, project: Path) -> tuple[int, int, str]:
    """Start the agent and wait until it has reached past its branch: (job, run, old main)."""
    main_before = git(project, "rev-parse", "main")
    job = d.add("reach past the branch", project)
    d.machine("idle")
    run_id = d.wait_run(job, "running")["id"]
    hook = project / ".git" / "hooks" / "pre-push"
    wait_for(
        lambda: git(project, "rev-parse", "main") != main_before and hook.exists(),
        what="the agent to move main and plant a hook",
    )
    wait_for(
        lambda: kept(d.home) == [f"{run_id}.outside.json"],
        what="the Run's start to be kept on disk",
    )
    return job, run_id, main_before


def kill_both(d: OwlDaemon) -> None:
    """Kill the daemon and its watchdog, so nothing records the live Run's end."""
    [guard] = watchdogs(d.home)
    guard.kill()
    guard.wait(5)
    d.kill()


def assert_reported(run: dict, main_before: str, main_after: str) -> None:
    assert run["outcome"] == "interrupted"
    found = {(c["kind"], c["name"]): c for c in run["outside"]}
    assert found[("ref", "refs/heads/main")] == {
        "kind": "ref",
        "name": "refs/heads/main",
        "from": main_before,
        "to": main_after,
    }
    assert found[("hook", "pre-push")]["from"] is None
    assert found[("hook", "pre-push")]["to"].endswith("(executable)")
    assert not any(c["name"].startswith("refs/heads/owl/") for c in run["outside"])


def assert_landed(project: Path, branch: str) -> None:
    """The Run cut short committed in its Job's store: that commit is on the
    project's branch once the crash is recovered."""
    assert git(project, "log", "-1", "--format=%s", branch) == "the Job's work"


def test_the_watchdog_records_what_the_agent_changed_when_the_daemon_is_killed(tmp_path):
    d, project = reacher(tmp_path)
    with d:
        job, run_id, main_before = reach(d, project)
        [guard] = watchdogs(d.home)
        d.kill()
        wait_for(lambda: not guard.is_running(), what="the watchdog to finish")
        # the guard alone recorded it, before any new start
        [(rid, outcome, text)] = db_outside(d.home)
        assert (rid, outcome) == (run_id, "interrupted") and text is not None
        assert kept(d.home) == []
        d.start()
        main_after = git(project, "rev-parse", "main")
        [run] = d.job(job)["runs"]
        assert_reported(run, main_before, main_after)
        assert_landed(project, d.job(job)["branch"])
        assert (
            f"job {job} run {run_id} (found after the crash): the agent moved main from "
            f"{main_before[:7]} to {main_after[:7]}"
        ) in d.log_text()
        shown = d.ok("jobs", "show", str(job))
        assert f"outside its branch, the agent moved main from {main_before[:7]}" in shown
        assert "outside its branch, the agent added the hook pre-push" in shown


def test_the_next_start_records_it_when_the_watchdog_died_too(tmp_path):
    d, project = reacher(tmp_path)
    with d:
        job, run_id, main_before = reach(d, project)
        kill_both(d)  # both die at once, as under the OOM killer
        assert [r[2] for r in db_outside(d.home)] == [None]  # nothing recorded it yet
        d.start()
        assert kept(d.home) == []
        assert_reported(d.job(job)["runs"][0], main_before, git(project, "rev-parse", "main"))
        assert_landed(project, d.job(job)["branch"])


def test_a_project_gone_by_the_next_start_is_said_to_be_unknown(tmp_path):
    d, project = reacher(tmp_path)
    with d:
        job, run_id, _ = reach(d, project)
        kill_both(d)
        shutil.rmtree(project)
        d.start()
        [entry] = d.job(job)["runs"][0]["outside"]
        assert entry["kind"] == "unknown" and str(project) in entry["to"]
        assert kept(d.home) == []
        assert "nothing was compared" in d.ok("jobs", "show", str(job))


def test_owls_own_merge_during_a_run_is_not_blamed_after_a_crash(tmp_path):
    from owl.git import outsidekeep

    from test_outside import merge_during_a_run, two_agents

    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", two_agents("exec sleep 60")) as d:
        second, run_id = merge_during_a_run(d, project)
        merged = git(project, "rev-parse", "main")
        path = outsidekeep.path_for(d.home / "logs", run_id)
        wait_for(
            lambda: outsidekeep.read(path)[2].refs.get("refs/heads/main") == merged,
            what="the kept start to take Owl's own merge in",
        )
        [guard] = watchdogs(d.home)
        d.kill()
        wait_for(lambda: not guard.is_running(), what="the watchdog to finish")
        d.start()
        run = [r for r in d.job(second)["runs"] if r["id"] == run_id][0]
        assert run["outcome"] == "interrupted" and run["outside"] == []
