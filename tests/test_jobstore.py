"""A Job's own git store: made, converted from a worktree made before stores,
its git files checked and put back without following a link, and its branch
brought into the project (only its branch; a rewritten tip kept)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


from owl.git import jobstore, storing, workspace
from owlproc import make_project


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(wt: Path, name: str) -> str:
    (wt / name).write_text(name + "\n")
    git(wt, "add", name)
    git(wt, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", name)
    return git(wt, "rev-parse", "HEAD")


def test_a_worktree_made_before_stores_is_given_one_with_its_changes_kept(tmp_path):
    p = make_project(tmp_path / "proj")
    wt = tmp_path / "owl" / "worktrees" / "job-1"
    wt.parent.mkdir(parents=True)
    git(p, "worktree", "add", "-q", "-b", "owl/job-1", str(wt))
    tip = commit(wt, "old.txt")
    (wt / "staged.txt").write_text("staged\n")
    git(wt, "add", "staged.txt")
    (wt / "README").write_text("changed, not staged\n")
    assert storing.linked_to_project(p, wt)
    ws = storing.ensure(p, 1, "owl/", wt.parent, branch="owl/job-1", worktree=wt)
    places = jobstore.places(p, ws.worktree)
    assert places.store == str(tmp_path / "owl" / "worktrees" / "job-1.git")
    assert jobstore.verify(places) == []
    assert not (p / ".git" / "worktrees" / "job-1").exists()
    assert git(wt, "rev-parse", "HEAD") == tip
    status = subprocess.run(
        ["git", "-C", str(wt), "status", "--porcelain"], capture_output=True, text=True
    ).stdout.splitlines()
    assert status == [" M README", "A  staged.txt"]
    new = commit(wt, "new.txt")
    storing.land(p, places, "owl/job-1")
    assert git(p, "rev-parse", "owl/job-1") == new
    assert "old.txt" in git(p, "log", "--format=%s", "owl/job-1")


def test_only_the_branch_is_brought_in_and_a_rewritten_tip_is_kept(tmp_path):
    p = make_project(tmp_path / "proj")
    ws = storing.ensure(p, 1, "owl/", tmp_path / "wts")
    places = jobstore.places(p, ws.worktree)
    first = commit(ws.worktree, "a.txt")
    git(ws.worktree, "tag", "planted")
    git(ws.worktree, "update-ref", "refs/heads/main", first)
    main = git(p, "rev-parse", "main")
    assert storing.land(p, places, ws.branch) is None
    assert git(p, "rev-parse", ws.branch) == first
    assert git(p, "rev-parse", "main") == main
    assert git(p, "tag") == ""
    git(
        ws.worktree,
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--amend",
        "-m",
        "b",
    )
    said = storing.land(p, places, ws.branch)
    assert said and first[:7] in said
    kept = git(p, "for-each-ref", "--format=%(objectname)", "refs/owl/dropped/")
    assert kept == first


def test_changed_git_files_are_found_and_put_back_without_following_a_link(tmp_path):
    p = make_project(tmp_path / "proj")
    other = make_project(tmp_path / "other")
    ws = storing.ensure(p, 1, "owl/", tmp_path / "wts")
    places = jobstore.places(p, ws.worktree)
    assert places.admin and places.store
    admin, store = Path(places.admin), Path(places.store)
    (admin / "commondir").write_text(f"{other}/.git\n")
    os.unlink(admin / "gitdir")
    os.symlink(other / ".git" / "HEAD", admin / "gitdir")
    (ws.worktree / ".git").write_text(f"gitdir: {other}/.git\n")
    # the store's objects/info made a link to the other repository's
    os.rename(store / "objects" / "info", store / "objects" / "info.old")
    os.symlink(other / ".git" / "objects" / "info", store / "objects" / "info")
    found = {e["name"]: e for e in jobstore.verify(places)}
    assert set(found) == {".git", "gitdir", "commondir", "alternates"}
    assert found["commondir"]["to"] == f"{other}/.git"
    failed = jobstore.restore(places, list(found.values()))
    assert [f.split(":")[0] for f in failed] == ["alternates"]  # a link is never followed
    assert not (other / ".git" / "objects" / "info" / "alternates").exists()
    assert (other / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert [e["name"] for e in jobstore.verify(places)] == ["alternates"]
    assert jobstore.tampered_reason(1, list(found.values()), failed).startswith(
        "the worktree's git files were changed"
    )


def test_a_store_whose_branch_is_a_link_is_not_read(tmp_path):
    p = make_project(tmp_path / "proj")
    ws = storing.ensure(p, 1, "owl/", tmp_path / "wts")
    places = jobstore.places(p, ws.worktree)
    assert places.store
    ref = Path(places.store, "refs", "heads", "owl", "job-1")
    ref.unlink()
    os.symlink(p / ".git" / "refs" / "heads" / "main", ref)
    before = git(p, "rev-parse", ws.branch)
    # the planted link is removed before the host's git reads the store (the
    # branch is then gone from it, as if the agent had deleted it): nothing of
    # main's is read as the Job's, and the project's branch stays as it was
    assert storing.land(p, places, ws.branch) is None
    assert not ref.is_symlink() and not ref.exists()
    assert git(p, "rev-parse", ws.branch) == before


def test_removing_a_worktree_removes_its_store(tmp_path):
    p = make_project(tmp_path / "proj")
    ws = storing.ensure(p, 1, "owl/", tmp_path / "wts")
    workspace.remove(p, ws.worktree)
    assert list((tmp_path / "wts").iterdir()) == []
    assert git(p, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_sha256_project_gets_a_sha256_store(tmp_path):
    p = tmp_path / "proj"
    subprocess.run(
        ["git", "init", "-q", "-b", "main", "--object-format=sha256", str(p)], check=True
    )
    commit(p, "README")
    ws = storing.ensure(p, 1, "owl/", tmp_path / "wts")
    new = commit(ws.worktree, "a.txt")
    assert len(new) == 64
    storing.land(p, jobstore.places(p, ws.worktree), ws.branch)
    assert git(p, "rev-parse", ws.branch) == new
