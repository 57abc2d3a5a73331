"""What Owl's safe git costs, and what a Run's before/after snapshot costs.

Compares `owl.git.workspace.git()` (config listed first, driver overrides, its
own session and process tree, ended on exit) with a plain `git` subprocess,
for `git status --porcelain` in a real repository with a worktree; then
times `outside.take()` (files only, run just before an agent starts) with
a repository of the usual shape: many packed refs (a clone, after gc) and
some loose ones (branches and fetches since the last gc).

Targets: the safe call adds at most 30 ms to a plain one (median); take()
stays under 10 ms (median) with 10,000 packed and 100 loose refs, since it
runs on the engine thread just before an agent starts.

    python bench/safe_git.py [--runs 50] [--packed 10000] [--loose 100]
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

from owl.git import outside
from owl.git import storing, workspace  # noqa: E402


def median_ms(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--packed", type=int, default=10000)
    ap.add_argument("--loose", type=int, default=100)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        env = dict(
            os.environ,
            GIT_AUTHOR_NAME="b",
            GIT_AUTHOR_EMAIL="b@example.invalid",
            GIT_COMMITTER_NAME="b",
            GIT_COMMITTER_EMAIL="b@example.invalid",
        )
        run = lambda *x: subprocess.run(
            ["git", "-C", str(repo), *x],
            check=True,  # noqa: E731
            capture_output=True,
            env=env,
        )
        repo.mkdir()
        run("init", "-q", "-b", "main")
        for i in range(50):
            (repo / f"f{i}.txt").write_text(f"{i}\n")
        run("add", "-A")
        run("commit", "-q", "-m", "one")
        head = run("rev-parse", "HEAD").stdout.decode().strip()
        (repo / ".git" / "packed-refs").write_text(
            "# pack-refs with: peeled fully-peeled sorted \n"
            + "".join(f"{head} refs/tags/p{i}\n" for i in range(a.packed))
        )
        (repo / ".git" / "refs" / "tags").mkdir(parents=True, exist_ok=True)
        for i in range(a.loose):
            (repo / ".git" / "refs" / "tags" / f"t{i}").write_text(head + "\n")
        ws = storing.ensure(repo, 1, "owl/", Path(tmp) / "wts")

        plain = median_ms(
            lambda: subprocess.run(
                ["git", "-C", str(ws.worktree), "status", "--porcelain"],
                capture_output=True,
                stdin=subprocess.DEVNULL,
            ),
            a.runs,
        )
        safe = median_ms(lambda: workspace.git(ws.worktree, "status", "--porcelain"), a.runs)
        take = median_ms(lambda: outside.take(repo), a.runs)
    print(f"git status, plain subprocess: median {plain[0]:.1f} ms, p95 {plain[1]:.1f} ms")
    print(
        f"git status, workspace.git():  median {safe[0]:.1f} ms, p95 {safe[1]:.1f} ms "
        f"(+{safe[0] - plain[0]:.1f} ms; target +30 ms)"
    )
    print(
        f"outside.take(), {a.packed} packed + {a.loose} loose refs: median {take[0]:.2f} ms, p95 {take[1]:.2f} ms "
        "(target 10 ms)"
    )
    ok = safe[0] - plain[0] <= 30 and take[0] <= 10
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
