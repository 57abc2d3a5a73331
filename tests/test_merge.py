"""`owl jobs accept --merge`: each case on real git repositories, then through the daemon.

The rules are in `owl.review.merge`: a fast-forward when it can (in the
checkout when it is on the base and clean, with a guarded update-ref when the
base is not checked out), a merge commit only in a clean checkout on the
base, and otherwise a refusal naming the git command. A dirty tree is never
touched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from owl.errors import Refused
from owl.review import merge
from owlproc import OwlDaemon, make_project

# What every suggested git command carries: no hook, no fsmonitor of the repository's.
SAFE = "-c core.hooksPath=/dev/null -c core.fsmonitor=false"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit(repo: Path, name: str, text: str, msg: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict]:
    """A project on main with a Job branch one commit ahead, in a worktree of its own."""
    project = make_project(tmp_path / "proj", {"README": "x\n"})
    base = git(project, "rev-parse", "HEAD")
    wt = tmp_path / "wt"
    git(project, "worktree", "add", "-q", "-b", "owl/job-1", str(wt), base)
    commit(wt, "hello.txt", "hello\n", "Add hello")
    job = {
        "id": 1,
        "branch": "owl/job-1",
        "base": base,
        "base_branch": "main",
        "title": "Add a hello file",
    }
    return project, job


def test_fast_forward_in_a_clean_checkout_on_the_base(repo):
    project, job = repo
    tip = git(project, "rev-parse", "owl/job-1")
    base, said = merge.merge(project, job)
    assert base == "main" and "fast-forwarded" in said
    assert git(project, "rev-parse", "main") == tip
    assert (project / "hello.txt").read_text() == "hello\n"  # the tree follows
    assert git(project, "status", "--porcelain") == ""


def test_fast_forward_with_the_base_not_checked_out_moves_only_the_ref(repo):
    project, job = repo
    git(project, "switch", "-q", "-c", "other")
    (project / "notes.txt").write_text("mine, uncommitted\n")  # untouched by the merge
    tip = git(project, "rev-parse", "owl/job-1")
    merge.merge(project, job)
    assert git(project, "rev-parse", "main") == tip
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD") == "other"
    assert not (project / "hello.txt").exists()
    assert (project / "notes.txt").read_text() == "mine, uncommitted\n"


def test_fast_forward_refused_on_a_dirty_checkout_on_the_base(repo):
    project, job = repo
    (project / "README").write_text("edited, not committed\n")
    before = git(project, "rev-parse", "main")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    assert "uncommitted changes" in str(e.value)
    assert f"git -C {project} {SAFE} merge --ff-only owl/job-1" in str(e.value)
    assert git(project, "rev-parse", "main") == before
    assert (project / "README").read_text() == "edited, not committed\n"


def test_merge_commit_when_the_base_moved_on_and_the_checkout_is_clean(repo):
    project, job = repo
    moved = commit(project, "other.txt", "other\n", "Meanwhile on main")
    tip = git(project, "rev-parse", "owl/job-1")
    _, said = merge.merge(project, job)
    assert "merge commit" in said
    parents = git(project, "log", "-1", "--format=%P", "main").split()
    assert parents == [moved, tip]
    assert git(project, "log", "-1", "--format=%s", "main") == "Merge owl/job-1: Add a hello file"
    assert (project / "hello.txt").exists() and (project / "other.txt").exists()


def test_merge_commit_refused_on_a_dirty_checkout(repo):
    project, job = repo
    moved = commit(project, "other.txt", "other\n", "Meanwhile on main")
    (project / "other.txt").write_text("edited\n")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    assert str(e.value).endswith(f"run: git -C {project} {SAFE} merge --no-ff owl/job-1")
    assert git(project, "rev-parse", "main") == moved
    assert (project / "other.txt").read_text() == "edited\n"


def test_merge_commit_refused_when_another_branch_is_checked_out(repo):
    project, job = repo
    moved = commit(project, "other.txt", "other\n", "Meanwhile on main")
    git(project, "switch", "-q", "-c", "feature")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    msg = str(e.value)
    assert "is on feature, not main" in msg
    assert (
        f"git -C {project} {SAFE} switch main && git -C {project} {SAFE} merge --no-ff owl/job-1"
    ) in msg
    assert git(project, "rev-parse", "main") == moved
    assert "\n" not in msg


def test_a_conflict_is_aborted_and_reported(repo):
    project, job = repo
    commit(project, "hello.txt", "a different hello\n", "Conflicting hello on main")
    before = git(project, "rev-parse", "main")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    assert "conflicts in hello.txt" in str(e.value)
    assert git(project, "rev-parse", "main") == before
    assert git(project, "status", "--porcelain") == ""


def test_a_branch_not_merged_is_never_deleted(repo):
    project, job = repo
    with pytest.raises(Refused):
        merge.delete_merged_branch(project, job)
    assert git(project, "rev-parse", "--verify", "-q", "refs/heads/owl/job-1")


def test_plan_is_pure_and_covers_the_cases():
    p = Path("/p")
    s = dict(
        project=p,
        base="main",
        branch="owl/job-3",
        merged=False,
        can_ff=True,
        base_tree=None,
        base_tree_clean=True,
        project_head="dev",
    )
    assert merge.plan(merge.Situation(**s)).kind == "update-ref"
    assert merge.plan(merge.Situation(**{**s, "base_tree": p})).kind == "ff"
    assert merge.plan(merge.Situation(**{**s, "merged": True})).kind == "nothing"
    assert merge.plan(merge.Situation(**{**s, "can_ff": False, "base_tree": p})).kind == "merge"
    other = merge.plan(merge.Situation(**{**s, "can_ff": False, "base_tree": Path("/elsewhere")}))
    assert other.kind == "refuse"
    assert f"git -C /elsewhere {SAFE} merge --no-ff owl/job-3" in other.message


# ------------------------------------------------------ through the daemon


def test_accept_merge_through_the_daemon_makes_the_job_done(tmp_path):
    project = make_project(tmp_path / "proj", {"README": "x\n"})
    with OwlDaemon(tmp_path / "owl") as d:
        job = d.add("write=hello.txt commit=Add_hello exit=0", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        worktree = Path(j["worktree"])
        tip = git(project, "rev-parse", j["branch"])
        out = d.ok("jobs", "accept", str(job), "--merge", "--delete-branch")
        assert "fast-forwarded" in out and "deleted" in out
        assert git(project, "rev-parse", "main") == tip
        assert d.job(job)["state"] == "done" and not worktree.exists()
        assert (
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(project),
                    "rev-parse",
                    "--verify",
                    "-q",
                    f"refs/heads/{j['branch']}",
                ],
                capture_output=True,
            ).returncode
            == 1
        )


def test_accept_merge_refused_leaves_the_job_in_review(tmp_path):
    project = make_project(tmp_path / "proj", {"README": "x\n"})
    with OwlDaemon(tmp_path / "owl") as d:
        job = d.add("write=hello.txt commit=Add_hello exit=0", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        (project / "README").write_text("dirty\n")
        proc = d.owl("jobs", "accept", str(job), "--merge")
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and "merge --ff-only" in proc.stderr
        assert d.job(job)["state"] == "review" and Path(j["worktree"]).is_dir()
        # without --merge, --delete-branch would lose the work: refused as well
        proc = d.owl("jobs", "accept", str(job), "--delete-branch")
        assert proc.returncode == 1 and "only copy" in proc.stderr
        assert d.job(job)["state"] == "review"


def test_a_merge_commit_git_cannot_make_is_undone_and_reported(repo, tmp_path):
    """No committer identity: git stops after merging the trees; Owl puts them back."""
    project, job = repo
    moved = commit(project, "other.txt", "other\n", "Meanwhile on main")
    git(project, "config", "--unset", "user.name")
    git(project, "config", "--unset", "user.email")
    env = {
        "HOME": str(tmp_path / "nohome"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "EMAIL": "",
        "GIT_AUTHOR_NAME": "",
        "GIT_COMMITTER_NAME": "",
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        with pytest.raises(Refused) as e:
            merge.merge(project, job)
    assert "nothing was changed" in str(e.value) and "\n" not in str(e.value)
    assert git(project, "rev-parse", "main") == moved
    assert git(project, "status", "--porcelain") == ""
    assert not (project / ".git" / "MERGE_HEAD").exists()


# ------------------------------------------------ a refused merge says why, and runs nothing


def _diverge(project: Path, job: dict, name: str) -> None:
    """main and the Job's branch both change `name`: a merge commit, with a conflict."""
    wt = project.parent / "wt"
    commit(wt, name, "theirs\n", "Job's side")
    commit(project, name, "ours\n", "Meanwhile on main")


def test_a_conflict_names_its_files_and_suggests_a_merge_that_runs_nothing(repo):
    project, job = repo
    _diverge(project, job, "clash.txt")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    msg = str(e.value)
    assert "(conflicts in clash.txt)" in msg and "nothing was changed" in msg
    assert msg.endswith(f"run: git -C {project} {SAFE} merge --no-ff owl/job-1 and resolve them")
    assert "Merge with strategy" not in msg
    assert git(project, "status", "--porcelain") == ""


def test_a_merge_driver_the_project_sets_is_named_not_run(repo, tmp_path):
    project, job = repo
    marker = tmp_path / "RAN-driver"
    driver = tmp_path / "driver.sh"
    driver.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    driver.chmod(0o755)
    planted = tmp_path / "planted.cfg"
    planted.write_text(f'[merge "evil"]\n\tdriver = {driver} %O %A %B\n')
    git(project, "config", "include.path", str(planted))
    (project / ".git" / "info" / "attributes").write_text("*.txt merge=evil\n")
    _diverge(project, job, "clash.txt")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    msg = str(e.value)
    assert not marker.exists()
    assert "merge driver 'evil' (merge.evil.driver) for clash.txt, which Owl does not run" in msg
    assert msg.endswith(
        f"look at it first: git -C {project} config --show-origin --get-regexp "
        f"'^merge[.]' and git -C {project} check-attr merge -- clash.txt"
    )
    assert "run:" not in msg


def test_a_driver_no_command_line_can_blank_says_to_look_first(repo, tmp_path):
    project, job = repo
    git(project, "config", "filter.a=b.smudge", str(tmp_path / "never"))
    _diverge(project, job, "clash.txt")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    msg = str(e.value)
    assert "filter.a=b.smudge" in msg and "look at them first" in msg
    assert msg.endswith(f"git -C {project} config --show-origin --get-regexp '^(filter|merge)[.]'")
    assert " merge --no-ff" not in msg


def test_a_merge_git_will_not_start_says_what_git_said(repo):
    project, job = repo
    wt = project.parent / "wt"
    commit(wt, "new.txt", "the job's\n", "Add new")
    commit(project, "other.txt", "other\n", "Meanwhile on main")
    (project / "new.txt").write_text("the person's, untracked\n")
    with pytest.raises(Refused) as e:
        merge.merge(project, job)
    msg = str(e.value)
    assert "untracked working tree files would be overwritten by merge: new.txt" in msg
    assert "Merge with strategy" not in msg and f"{SAFE} merge --no-ff owl/job-1" in msg
    assert (project / "new.txt").read_text() == "the person's, untracked\n"
