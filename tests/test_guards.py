"""drop and accept never lose committed work, and never guess when git cannot answer.

The real daemon, the real `owl` command and real git: an agent commits, or
deletes its worktree's `.git`, or moves the project away; the person then
drops or accepts the Job and reads one line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from owlproc import AGENT, OwlDaemon, make_project, wait_for

from owl.git import workspace


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check
    )


def daemon(tmp_path: Path, harm: str = "exit 0") -> OwlDaemon:
    cfg = {
        "agents": {
            "sh": {"command": ["/bin/sh", "-c", 'eval "$HARM"']},
            "script": {"command": [sys.executable, AGENT, "{prompt}"]},
        }
    }
    return OwlDaemon(tmp_path / "home", cfg, env={"HARM": harm})


def refused(d: OwlDaemon, *args: str) -> str:
    """The one line `owl` answers a refused request with."""
    p = d.owl(*args)
    assert p.returncode != 0, f"owl {' '.join(args)} was not refused: {p.stdout}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "internal error" not in lines[0] and "Traceback" not in p.stderr
    return lines[0]


def test_drop_refuses_to_lose_commits_and_with_force_keeps_them_reachable(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add("write=a.txt commit=first write=b.txt commit=second handoff=notes", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        branch = j["branch"]
        tip = git(project, "rev-parse", branch).stdout.strip()
        # the scripted agent leaves its .owl/HANDOFF.md uncommitted: that guard first
        assert "has uncommitted changes" in refused(d, "jobs", "drop", str(job))
        shutil.rmtree(Path(j["worktree"]) / ".owl")
        line = refused(d, "jobs", "drop", str(job))
        assert f"branch {branch} has 2 commits found on no other branch (use --force" in line
        assert git(project, "rev-parse", branch).stdout.strip() == tip
        assert d.job(job)["state"] == "review"

        out = d.ok("jobs", "drop", "--force", str(job)).strip()
        assert (
            f"job {job} dropped; branch {branch} deleted at {tip[:7]}; git branch "
            f"{branch} {tip[:7]} brings it back (kept as refs/owl/dropped/{branch}/"
        ) in out
        assert out.endswith("for 30 days)")
        assert (
            git(
                project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False
            ).returncode
            != 0
        )
        kept = git(
            project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/owl/dropped/"
        ).stdout.split()
        assert kept[1] == tip and kept[0].startswith(f"refs/owl/dropped/{branch}/")
        # what the line says brings it back does
        git(project, "branch", branch, tip[:7])
        assert git(project, "log", "--format=%s", branch).stdout.split()[:2] == ["second", "first"]


def test_a_branch_without_commits_of_its_own_drops_without_force(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add("write=a.txt", project, "--agent", "script")
        d.machine("idle")
        d.wait_job(job, "review")
        assert "uncommitted" in refused(d, "jobs", "drop", str(job))  # a.txt, .owl/
        wt = tmp_path / "home" / "worktrees" / f"job-{job}"
        (wt / "a.txt").unlink()
        shutil.rmtree(wt / ".owl", ignore_errors=True)
        out = d.ok("jobs", "drop", str(job)).strip()
        assert out.startswith(f"job {job} dropped")
        assert "refs/owl/dropped" not in git(project, "for-each-ref").stdout


def test_an_agent_that_deletes_its_worktrees_git_blocks_the_job(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, "echo x > new.txt; rm -f .git; exit 0") as d:
        job = d.add("go", project, "--agent", "sh")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        [run] = j["runs"]
        assert run["outcome"] == "failed"
        # after the Run, Owl finds the worktree's .git gone and writes it back
        j = wait_for(
            lambda: "put them back" in (r := d.job(job))["reason"] and r,
            what="the git files' check after the Run",
        )
        assert ".git said None" in j["reason"] and f"owl jobs drop {job}" in j["reason"]
        assert "git files were changed" in d.ok("jobs", "show", str(job))
        line = refused(d, "jobs", "drop", str(job))
        assert line.startswith(f"owl: job {job}'s worktree") and "uncommitted" in line
        assert "not in review" in refused(d, "jobs", "accept", str(job))
        d.ok("jobs", "drop", str(job), "--force")
        assert not Path(j["worktree"]).exists()


def test_a_project_moved_during_a_run_blocks_the_job_and_accept_says_why(tmp_path):
    project = make_project(tmp_path / "proj")
    moved = tmp_path / "elsewhere"
    with daemon(tmp_path, f"git commit -q --allow-empty -m work && mv {project} {moved}") as d:
        job = d.add("go", project, "--agent", "sh")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        assert j["runs"][0]["outcome"] == "failed"
        assert j["reason"].startswith(
            f"the project {project} is gone (moved or deleted): "
            f"move it back and run owl jobs extend {job}"
        )
        line = refused(d, "jobs", "drop", str(job))
        assert f"cannot drop job {job}: nothing can tell" in line
        # moved back, extend lets it run again (and this agent moves it again)
        moved.rename(project)
        # the commit waits in the Job's own store; the next Run's setup brings it in
        assert git(Path(j["worktree"]), "log", "--format=%s").stdout.split()[0] == "work"
        d.ok("jobs", "extend", str(job))
        j = wait_for(
            lambda: len((x := d.job(job))["runs"]) == 2 and x["state"] == "blocked" and x,
            what="the second Run to block the Job",
        )
        assert j["runs"][1]["outcome"] == "failed"
        moved.rename(project)
        # the first Run's commit was brought in by the second's setup
        assert git(project, "log", "--format=%s", j["branch"]).stdout.split()[0] == "work"


def test_accept_of_a_job_whose_project_moved_says_what_it_cannot_do(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add("write=a.txt commit=work", project, "--agent", "script")
        d.machine("idle")
        d.wait_job(job, "review")
        project.rename(tmp_path / "elsewhere")
        line = refused(d, "jobs", "accept", str(job))
        assert line == (
            f"owl: cannot accept job {job}: the project {project} is gone (moved or "
            f"deleted); its branch owl/job-{job} lives there, so move the project "
            "back, or drop the job with --force"
        )
        line = refused(d, "jobs", "drop", str(job))
        assert "nothing can tell" in line
        out = d.ok("jobs", "drop", str(job), "--force")
        assert "its worktree and branch were left as they are: the project" in out


def test_a_job_whose_project_moved_between_runs_never_starts_in_a_broken_worktree(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add("tick=0.2 sleep=60", project, "--agent", "script")
        d.machine("idle")
        d.wait_run(job, "running")
        d.machine("input")
        d.wait_job(job, "pending", timeout=30)  # frozen, then ended after the grace
        project.rename(tmp_path / "elsewhere")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        assert len(j["runs"]) == 1
        assert j["reason"].startswith(f"the project {project} is gone")


def test_old_dropped_refs_are_pruned(tmp_path):
    project = make_project(tmp_path / "proj")
    head = git(project, "rev-parse", "HEAD").stdout.strip()
    old = workspace.keep_dropped(project, "owl/job-1", head, now=1_000_000)
    new = workspace.keep_dropped(project, "owl/job-2", head, now=2_000_000_000)
    assert workspace.prune_dropped(project, now=2_000_000_100) == [old]
    refs = git(project, "for-each-ref", "--format=%(refname)", "refs/owl/").stdout.split()
    assert refs == [new]


def test_a_guard_that_cannot_check_refuses(tmp_path):
    wt = tmp_path / "not-a-worktree"
    wt.mkdir()
    (wt / ".git").write_text("gitdir: /nonexistent/worktrees/job-1\n")
    with pytest.raises(workspace.WorkspaceError, match="not a git worktree any more"):
        workspace.is_dirty(wt)


def test_commits_the_person_merged_elsewhere_are_not_the_branchs_own(tmp_path):
    project = make_project(tmp_path / "proj")
    base = git(project, "rev-parse", "HEAD").stdout.strip()
    git(project, "checkout", "-q", "-b", "owl/job-1")
    git(project, "commit", "-q", "--allow-empty", "-m", "work")
    git(project, "checkout", "-q", "main")
    assert workspace.own_commits(project, "owl/job-1", base) == 1
    git(project, "merge", "-q", "--ff-only", "owl/job-1")
    assert workspace.own_commits(project, "owl/job-1", base) == 0


def test_a_live_job_dropped_with_force_says_later_where_its_commits_are(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add("write=a.txt commit=work tick=0.2 sleep=60", project, "--agent", "script")
        d.machine("idle")
        d.wait_run(job, "running")
        wt = Path(d.job(job)["worktree"])  # committed in the Job's own store
        wait_for(
            lambda: git(wt, "log", "--format=%s", check=False).stdout.startswith("work"),
            what="the agent's commit",
        )
        tip = git(wt, "rev-parse", "HEAD").stdout.strip()
        out = d.ok("jobs", "drop", "--force", str(job))
        assert f"owl jobs show {job} then says where" in out
        j = wait_for(
            lambda: "deleted at" in ((x := d.job(job))["reason"] or "") and x,
            what="the drop's outcome to be recorded",
        )
        assert (
            f"branch owl/job-{job} deleted at {tip[:7]}; git branch owl/job-{job} "
            f"{tip[:7]} brings it back"
        ) in j["reason"]
        assert git(
            project, "for-each-ref", "--format=%(objectname)", "refs/owl/dropped/"
        ).stdout.split() == [tip]
