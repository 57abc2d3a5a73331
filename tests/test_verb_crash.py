"""`owl jobs drop` and `accept` survive a `kill -9` of the real daemon at any point.

A slow git stand-in (`support.slowgit`) holds the verb right after one of its
git steps; the daemon is killed there, and the next start must finish (or
undo) the verb: the branch kept under refs/owl/dropped/ before it is deleted,
a merge that completed marking the Job done, a half-removed worktree cleaned.
The verb's own git must not outlive the daemon either.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Iterator, NamedTuple

import psutil
from owlproc import OWL, OwlDaemon, make_project, wait_for
from support.slowgit import SlowGit
from test_setup import sleepers


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def branches(project: Path) -> list[str]:
    return git(project, "for-each-ref", "--format=%(refname)", "refs/heads/").split()


def _job_in_review(d: OwlDaemon, project: Path) -> tuple[int, dict, str]:
    job = d.add("write=a.txt commit=work exit=0", project)
    d.machine("idle")
    d.wait_job(job, "review")
    row = d.job(job)
    return job, row, git(project, "rev-parse", row["branch"])


def _kill_during(d: OwlDaemon, slow: SlowGit, on: str, *verb: str, guard_too: bool = False) -> None:
    """Run the verb, hold it right after its git `on`, and kill -9 the daemon there
    (with `guard_too`, its watchdog first, as a power cut takes both and the
    git with them, so that nothing recovers until the next start). The git it
    was running must be gone with the daemon."""
    slow.slow(60, on=on)
    client = subprocess.Popen(
        [*OWL, *verb], env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: sleepers(slow.folder), timeout=20, what=f"the verb held after {on}")
        slow.slow(None)  # recovery's own git runs at full speed
        if guard_too:
            assert d.proc is not None
            for child in psutil.Process(d.proc.pid).children():
                try:  # a short-lived child of the daemon may be gone already
                    is_watchdog = "owl.daemon.watchdog" in child.cmdline()
                except psutil.Error:
                    continue
                if is_watchdog:
                    # Pending once kill() returns: it runs no more of its code.
                    child.kill()
        d.kill()
        if guard_too:  # the watchdog ends the verb's git; here the power cut does
            for p in sleepers(slow.folder):
                p.kill()
        wait_for(
            lambda: not sleepers(slow.folder),
            timeout=5,
            what="the verb's git ended with the daemon",
        )
    finally:
        client.kill()
        client.communicate()


class Crash(NamedTuple):
    """A Job in review whose verb the daemon was killed in; the daemon is down."""

    d: OwlDaemon
    project: Path
    job: int
    row: dict
    tip: str  # the Job's branch before the verb
    base: str  # main before the verb


@contextlib.contextmanager
def verb_killed(
    tmp_path: Path, verb: str, *flags: str, on: str, guard_too: bool = False
) -> Iterator[Crash]:
    """`owl jobs VERB JOB FLAGS` on a Job in review, the daemon killed -9 right
    after the verb's git `on`; the test starts it again when it is ready.

    The daemon's watchdog finishes the verb as soon as the daemon is dead; a
    test that changes the worktree before the next start kills it too
    (`guard_too`), or the two race."""
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    d = OwlDaemon(tmp_path / "home", env={"PATH": slow.path()})
    d.start()
    passed = False
    try:
        job, row, tip = _job_in_review(d, project)
        base = git(project, "rev-parse", "main")
        _kill_during(d, slow, on, "jobs", verb, str(job), *flags, guard_too=guard_too)
        yield Crash(d, project, job, row, tip, base)
        passed = True
    finally:
        if passed:
            d.__exit__(None, None, None)
        else:
            # A graceful stop would wait for a verb's git the slow stand-in
            # holds, and its timeout would hide the failure being raised.
            d.kill_all()
            for p in sleepers(slow.folder):
                with contextlib.suppress(psutil.Error):
                    p.kill()


def test_drop_killed_after_the_worktree_went_is_finished_with_the_branch_kept(tmp_path):
    with verb_killed(tmp_path, "drop", "--force", on="worktree remove") as c:
        assert f"refs/heads/{c.row['branch']}" in branches(c.project)  # cut short here
        c.d.start()
        after = c.d.job(c.job)
        assert after["state"] == "cancelled"
        assert f"refs/heads/{c.row['branch']}" not in branches(c.project)
        kept = git(
            c.project,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            f"refs/owl/dropped/{c.row['branch']}/",
        ).split()
        assert len(kept) == 2 and kept[1] == c.tip
        assert "kept as refs/owl/dropped/" in after["reason"]
        assert not Path(c.row["worktree"]).exists()


def test_drop_killed_before_the_worktree_went_cleans_a_half_removed_one(tmp_path):
    # the first update-ref is the keeping of the branch's tip
    with verb_killed(tmp_path, "drop", "--force", on="update-ref", guard_too=True) as c:
        assert (
            git(
                c.project,
                "for-each-ref",
                "--format=%(objectname)",
                f"refs/owl/dropped/{c.row['branch']}/",
            )
            == c.tip
        )  # kept before all else
        worktree = Path(c.row["worktree"])
        (worktree / ".git").unlink()  # as a removal cut in half leaves it
        (worktree / "a.txt").unlink()
        c.d.start()
        assert not worktree.exists()
        assert git(c.project, "worktree", "list", "--porcelain").count("worktree ") == 1
        assert f"refs/heads/{c.row['branch']}" not in branches(c.project)
        assert c.d.job(c.job)["state"] == "cancelled"


def test_accept_merge_killed_after_the_merge_marks_the_job_done(tmp_path):
    with verb_killed(tmp_path, "accept", "--merge", on="merge") as c:
        assert git(c.project, "rev-parse", "main") == c.tip  # git had merged
        c.d.start()
        after = c.d.job(c.job)
        assert after["state"] == "done"
        assert not Path(c.row["worktree"]).exists()
        assert f"refs/heads/{c.row['branch']}" in branches(c.project)  # kept: not asked


def test_accept_merge_killed_before_the_merge_leaves_it_in_review_to_do_again(tmp_path):
    with verb_killed(tmp_path, "accept", "--merge", "--delete-branch", on="merge-base") as c:
        c.d.start()
        after = c.d.job(c.job)
        assert after["state"] == "review" and "nothing was merged" in after["reason"]
        assert git(c.project, "rev-parse", "main") == c.base
        assert Path(c.row["worktree"]).is_dir()
        c.d.ok("jobs", "accept", str(c.job), "--merge", "--delete-branch")
        assert c.d.job(c.job)["state"] == "done"
        assert git(c.project, "rev-parse", "main") == c.tip


def test_accept_killed_while_removing_the_worktree_deletes_the_branch_asked_for(tmp_path):
    with verb_killed(tmp_path, "accept", "--merge", "--delete-branch", on="worktree remove") as c:
        c.d.start()
        assert c.d.job(c.job)["state"] == "done"
        assert f"refs/heads/{c.row['branch']}" not in branches(c.project)
        assert git(c.project, "rev-parse", "main") == c.tip
        assert not Path(c.row["worktree"]).exists()
