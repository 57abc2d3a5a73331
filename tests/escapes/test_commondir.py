"""The worktree's git files never steer a Run: a `commondir` (or `gitdir`, or
the worktree's `.git`) rewritten by one Run, through a symbolic link so that
its lexical and resolved paths differ, gives the next Run nothing of another
repository or of Owl's folders. The Job is blocked with the reason, the Run's
report says what it found, Owl puts the files back, and the work lands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from escapes.gitrun import base, daemon, git, landed, outside_of, refused, run_log
from owl.engine import containing
from owl.git import jobstore, storing
from owl.sandbox import contain, policy
from owlproc import make_project
from support.need import programs

__all__ = ["base"]

# Run 1 plants; every later Run tries to use what was planted.
ATTACK = r"""
ADMIN=$(sed 's/^gitdir: //' .git)
if [ ! -e planted.txt ]; then
  echo planted > planted.txt
  git add planted.txt && git commit -qm "the Job's work" && echo "committed"
  DEEP="$PWD/deep/a/b"
  UP="$(echo "$DEEP" | sed 's|[^/][^/]*|..|g; s|^/||')/"
  mkdir -p "$DEEP" && ln -sfn "$DEEP" "$ADMIN/L"
  printf '%s\n' "L/$UP${OTHER_GIT#/}" > "$ADMIN/commondir"
  printf '%s\n' "$OTHER_GIT" > "$ADMIN/gitdir"
  echo "planted"
  exit 0
else
  try "write the other repository's refs through git" "git update-ref refs/heads/planted-by-agent HEAD && test -e $OTHER_GIT/refs/heads/planted-by-agent"
  try "write the other repository's refs" "touch $OTHER_GIT/refs/heads/planted-by-agent"
  try "add alternates to the other repository" "echo /var/tmp > $OTHER_GIT/objects/info/alternates"
  try "read Owl's logs" "ls $OWL_LOGS | grep -q log"
  touch "$OWL_LOGS/planted" 2>/dev/null  # lands in an empty folder of its own, if anywhere
fi
"""


def test_a_planted_commondir_blocks_the_job_and_the_next_run_reaches_nothing_of_it(base):
    programs("bwrap", "git")
    checks = '[[checks]]\nname = "unit"\nrun = "git status --porcelain"\n'
    p = make_project(base / "proj", {"README": "a project\n", ".owl.toml": checks})
    other = make_project(base / "person" / "code" / "other")
    before = git(other, "for-each-ref")
    known = {"OTHER_GIT": other / ".git", "OWL_LOGS": base / "owl" / "logs"}
    with daemon(base, ATTACK, known) as d:
        job = d.add("do the work", p)
        d.ok("start")
        j = d.wait_job(job, "blocked", timeout=120)
        log = run_log(j)
        assert "planted" in log and "committed" in log, log
        # its check, checked for first, never started in a worktree so steered
        [check] = j["runs"][0]["checks"]
        assert check["outcome"] == "failed" and "git files were changed" in check["output"]
        assert "commondir" in j["reason"] and "put them back" in j["reason"], j["reason"]
        report = outside_of(d, job)
        assert any("git file commondir" in line for line in report), report
        assert any("git file gitdir" in line for line in report), report
        places = jobstore.places(p, j["worktree"])
        assert jobstore.verify(places) == []  # put back as Owl made them
        landed(p, j["branch"])
        # Run 2, once the person lets the Job go on
        d.ok("jobs", "extend", str(job))
        d.ok("start")
        j = d.wait_job(job, "review", timeout=120)
        assert [c["outcome"] for c in j["runs"][-1]["checks"]] == ["passed"]
        refused(
            run_log(j),
            "write the other repository's refs through git",
            "write the other repository's refs",
            "add alternates to the other repository",
            "read Owl's logs",
        )
        landed(p, j["branch"], runs=2)
    assert git(other, "for-each-ref") == before
    assert not (other / ".git" / "objects" / "info" / "alternates").exists()
    assert not (base / "owl" / "logs" / "planted").exists()


def test_the_binds_come_from_owls_records_whatever_the_admin_folder_says(tmp_path):
    """With the redirect left in place (as if nothing had checked it), the
    Run's git cannot write the repository `commondir` names: only the Job's
    store is writable."""
    programs("bwrap", "git")
    p = make_project(tmp_path / "proj")
    other = make_project(tmp_path / "other")
    owl = tmp_path / "owl"
    wt = owl / "worktrees" / "job-1"
    git(p, "branch", "owl/job-1")
    places = storing.create(p, wt, "owl/job-1")
    assert places.admin is not None
    deep = tmp_path / "deep" / "a"
    deep.mkdir(parents=True)
    os.symlink(deep, Path(places.admin, "L"))
    up = "../" * len(deep.parts[1:])
    Path(places.admin, "commondir").write_text(f"L/{up}{str(other / '.git').lstrip('/')}\n")
    assert (Path(places.admin) / Path(places.admin, "commondir").read_text().strip()).resolve() == (
        other / ".git"
    )
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    script = (
        f"touch {other}/.git/refs/heads/planted || echo no-other-refs; "
        f"git update-ref refs/heads/planted HEAD || echo no-update; "
        f"touch {places.store}/refs/heads/mine && echo own-store"
    )
    w = contain.wrap(
        ["sh", "-c", script],
        settings=policy.Settings(),
        agent="script",
        env=env,
        worktree=places.worktree,
        project=str(p),
        owl_dirs=[str(owl)],
        git=containing.git_places(places),
    )
    done = subprocess.run(w.argv, cwd=wt, env=env, capture_output=True, text=True, timeout=60)
    assert "no-other-refs" in done.stdout and "no-update" in done.stdout, done
    assert "own-store" in done.stdout, done
    assert not (other / ".git" / "refs" / "heads" / "planted").exists()
    found = jobstore.verify(places)
    assert [e["name"] for e in found] == ["commondir"]
