"""The project's history out of a Run's reach: its refs (main, tags, another
Job's branch, packed-refs) and its objects (packs, loose objects, alternates)
are read only inside; what the agent does to refs through git lands in its
Job's own store, is reported, and never reaches the project; its own commit
reaches its branch."""

from __future__ import annotations

import os
import subprocess

from escapes.gitrun import base, daemon, git, landed, outside_of, project, refused, run_log, state
from owl.engine import containing
from owl.git import storing
from owl.sandbox import contain, policy
from support.need import programs

from owlproc import make_project

__all__ = ["base"]

ATTACK = r"""
SHA=$(git rev-parse HEAD)
PACK=$(ls "$PROJECT_GIT"/objects/pack/*.pack | head -1)
try "move main with git in the project" "git -C $PROJECT update-ref refs/heads/main $SHA~1"
try "write main's ref file" "echo $SHA > $PROJECT_GIT/refs/heads/main"
try "make a tag in the project" "git -C $PROJECT tag planted-by-agent"
try "move another Job's branch" "git -C $PROJECT update-ref refs/heads/owl/job-99 $SHA"
try "rewrite packed-refs" "echo '# planted' >> $PROJECT_GIT/packed-refs"
try "delete a pack" "rm $PACK"
try "replace a pack" "cp /dev/null $PACK"
try "delete a loose object" "rm $LOOSE"
try "add an alternate" "mkdir -p $PROJECT_GIT/objects/info && echo /var/tmp >> $PROJECT_GIT/objects/info/alternates"
try "repack the project" "git -C $PROJECT repack -a -d -q"
# through git in the worktree: its own store takes it, the project never sees it
git update-ref refs/heads/main "$SHA~1" && git tag planted-by-agent && echo "moved its own"
"""


def test_a_run_cannot_touch_the_projects_refs_or_objects_and_its_work_lands(base):
    programs("bwrap", "git")
    p = project(base)
    head = git(p, "rev-parse", "HEAD").strip()
    loose = p / ".git" / "objects" / head[:2] / head[2:]
    assert loose.is_file()  # the attack's target is there to be deleted
    before = state(p)
    known = {"PROJECT": p, "PROJECT_GIT": p / ".git", "LOOSE": loose}
    with daemon(base, ATTACK, known) as d:
        job = d.add("do the work", p)
        d.ok("start")
        j = d.wait_job(job, "review", timeout=120)
        log = run_log(j)
        refused(
            log,
            "move main with git in the project",
            "write main's ref file",
            "make a tag in the project",
            "move another Job's branch",
            "rewrite packed-refs",
            "delete a pack",
            "replace a pack",
            "delete a loose object",
            "add an alternate",
            "repack the project",
        )
        assert "moved its own" in log, log
        report = outside_of(d, job)
        assert any("main" in line and "its own store" in line for line in report), report
        assert any("tag planted-by-agent" in line for line in report), report
        after = state(p)
        assert after["refs"] == before["refs"]
        assert after["packed-refs"] == before["packed-refs"]
        # every object file is still there as it was (the landing adds the Job's own)
        objects = after["objects"]
        assert isinstance(objects, dict)
        assert {k: objects.get(k) for k in before["objects"]} == before["objects"]
        assert "info/alternates" not in objects
        assert git(p, "rev-parse", "main").strip() == head
        git(p, "fsck", "--no-dangling")
        landed(p, j["branch"])


def test_a_writable_folder_holding_the_project_does_not_open_its_history(base):
    """`sandbox.write = ["~"]` with the project under the home: the project's git
    folder is laid read only over the writable home, as before over the root."""
    programs("bwrap", "git")
    home = base / "home"
    p = make_project(home / "code" / "api")
    git(p, "branch", "owl/job-1")
    owl = base / "owl"
    places = storing.create(p, owl / "worktrees" / "job-1", "owl/job-1")
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    main = p / ".git" / "refs" / "heads" / "main"
    script = (
        f"echo planted > {home}/notes.txt && echo home-written; "
        f"echo 0 > {main} || echo no-main; "
        f"touch {p}/.git/objects/info/alternates || echo no-alternates; "
        f"touch {places.store}/refs/heads/mine && echo own-store"
    )
    w = contain.wrap(
        ["sh", "-c", script],
        settings=policy.Settings(write=(str(home),)),
        agent="script",
        env=env,
        worktree=places.worktree,
        project=str(p),
        owl_dirs=[str(owl)],
        git=containing.git_places(places),
    )
    done = subprocess.run(w.argv, cwd=places.worktree, env=env, capture_output=True, text=True)
    for said in ("home-written", "no-main", "no-alternates", "own-store"):
        assert said in done.stdout, done
    assert (home / "notes.txt").read_text() == "planted\n"
    assert main.read_text().strip() == git(p, "rev-parse", "main").strip() != "0"
    assert not (p / ".git" / "objects" / "info" / "alternates").exists()
