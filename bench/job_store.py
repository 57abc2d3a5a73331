"""What a Job's own git store costs: a worktree set up with one, against the
worktree linked to the project as before, and the branch brought in after a Run.

A repository of the size given (files in the checkout, tags and branches),
then, for each round, a fresh Job's worktree made both ways with Owl's safe
git, and a Run's commit brought into the project (`storing.land`, a fetch of
one branch). Prints medians and the largest.

Target: the store adds at most 10 % to setting up a worktree, whose checkout
is most of it on a big repository; bringing a branch in stays under 300 ms.

    python bench/job_store.py [--files 20000] [--refs 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))

from owl.git import jobstore, storing, workspace  # noqa: E402

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}


def sh(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "gc.auto=0", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env=ENV,
    ).stdout


def big_repo(path: Path, files: int, refs: int) -> Path:
    sh(path.parent, "init", "-q", "-b", "main", str(path))
    for i in range(files):
        d = path / f"d{i // 500}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "big")
    head = sh(path, "rev-parse", "HEAD").strip()
    lines = "".join(f"create refs/tags/t{i} {head}\n" for i in range(refs))
    subprocess.run(
        ["git", "-C", str(path), "update-ref", "--stdin"], input=lines, text=True, check=True
    )
    sh(path, "gc", "-q")
    return path


def linked(project: Path, worktree: Path, branch: str) -> None:
    """The worktree as Owl made it before stores (workspace.ensure's old path)."""
    head = workspace.git(project, "rev-parse", "HEAD").stdout.strip()
    workspace.git(project, "worktree", "add", "--no-checkout", "-b", branch, str(worktree), head)
    workspace.git(worktree, "reset", "--hard", "-q", "HEAD")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--refs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        t = Path(tmp)
        t0 = time.perf_counter()
        project = big_repo(t / "proj", a.files, a.refs)
        print(
            f"repository: {a.files} files, {a.refs} tags ({time.perf_counter() - t0:.1f} s to make)"
        )
        before, after, land = [], [], []
        for n in range(a.rounds):
            s = time.perf_counter()
            linked(project, t / "old" / f"job-{n}", f"old/job-{n}")
            before.append(time.perf_counter() - s)
            s = time.perf_counter()
            ws = storing.ensure(project, n + 1, "owl/", t / "wts")
            after.append(time.perf_counter() - s)
            (ws.worktree / "new.txt").write_text("new\n")
            sh(ws.worktree, "add", "new.txt")
            sh(ws.worktree, "commit", "-qm", "work")
            places = jobstore.places(project, ws.worktree)
            s = time.perf_counter()
            storing.land(project, places, ws.branch)
            land.append(time.perf_counter() - s)

        def say(name: str, xs: list[float]) -> None:
            print(
                f"{name}: median {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms"
            )

        say("worktree linked to the project (before)", before)
        say("worktree with a store of its own (now)", after)
        say("the branch brought in after a Run", land)
        extra = statistics.median(after) / statistics.median(before) - 1
        print(
            f"the store adds {extra * 100:+.0f} % to a setup (median); load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
