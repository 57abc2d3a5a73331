"""The top of a Job's git store inside a Run: git may make its lock files there
(git 2.47 locks `packed-refs` to delete any ref, AUTO_MERGE on every commit, and
printed an error on each), and nothing the Run writes there lasts or reaches
Owl's store: packed-refs, config, HEAD and the hooks stay as Owl made them."""

from __future__ import annotations

import os
import subprocess

from escapes.gitrun import git
from owl.engine import containing
from owl.git import storing
from owl.sandbox import contain, policy
from support.need import programs

from owlproc import make_project

ATTACK = r"""
S={store}
touch $S/packed-refs.lock && rm $S/packed-refs.lock && echo lock-made
git update-ref -d AUTO_MERGE 2>err && ! grep -q packed-refs err && echo delete-quiet
git -c user.name=a -c user.email=a@b commit -q --allow-empty -m work && echo committed
try() {{ if sh -c "$2" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "refused: $1"; fi; }}
try "rewrite packed-refs" "echo planted >> $S/packed-refs"
try "rename over packed-refs" "echo x > $S/packed-refs.lock && mv $S/packed-refs.lock $S/packed-refs"
try "rewrite the config" "echo '[core]' >> $S/config"
try "point HEAD elsewhere" "echo 'ref: refs/heads/main' > $S/HEAD"
try "a hook" "echo exit 0 > $S/hooks/post-commit"
try "replace the hooks" "mv $S/hooks $S/old-hooks"
touch $S/shallow $S/planted && echo top-scratch
"""


def test_git_may_lock_at_the_stores_top_and_nothing_made_there_lasts(tmp_path):
    programs("bwrap", "git")
    p = make_project(tmp_path / "proj")
    owl = tmp_path / "owl"
    wt = owl / "worktrees" / "job-1"
    git(p, "branch", "owl/job-1")
    places = storing.create(p, wt, "owl/job-1")
    store = places.store
    assert store is not None
    (tmp_path / "home").mkdir()
    before = {
        n: (open(os.path.join(store, n), "rb").read()) for n in ("packed-refs", "config", "HEAD")
    }
    hooks = (
        sorted(os.listdir(os.path.join(store, "hooks")))
        if os.path.isdir(os.path.join(store, "hooks"))
        else None
    )
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}
    w = contain.wrap(
        ["sh", "-c", ATTACK.format(store=store)],
        settings=policy.Settings(),
        agent="script",
        env=env,
        worktree=places.worktree,
        project=str(p),
        owl_dirs=[str(owl)],
        git=containing.git_places(places),
    )
    done = subprocess.run(w.argv, cwd=wt, env=env, capture_output=True, text=True, timeout=60)
    out = done.stdout
    assert "lock-made" in out and "delete-quiet" in out and "committed" in out, done
    assert "ESCAPED" not in out and out.count("refused: ") == 6, out
    assert "top-scratch" in out, out
    # nothing of it on the host: the store's files as Owl made them, no new ones
    assert {n: open(os.path.join(store, n), "rb").read() for n in before} == before
    assert not os.path.exists(os.path.join(store, "shallow"))
    assert not os.path.exists(os.path.join(store, "planted"))
    assert not os.path.exists(os.path.join(store, "packed-refs.lock"))
    if hooks is not None:
        assert sorted(os.listdir(os.path.join(store, "hooks"))) == hooks
    # the commit reached the Job's branch in its store
    assert "work" in git(wt, "log", "-1", "--format=%s")
