"""The peak memory of reviewing a Job whatever its commit holds.

Two Jobs, each a real git branch: (a) one commit adding a 2 GB sparse file
(a few MB in git: zeros compress), (b) one commit adding 100,000 small files.
For each, `owl jobs diff ID` into a file and `owl jobs review ID --no-open`
run as the person runs them, each in a process of its own; the figure is the
largest resident set of that process or of any git it started (the kernel's
`ru_maxrss` over the waited-for children, read by a small parent that runs
only the one command). Also printed: the seconds it took, what `jobs diff`
wrote and the page's size. Target: every peak under 100 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))

from owl.store.db import Store  # noqa: E402

TARGET_MB = 100
OWL = [sys.executable, "-m", "owl"]

# Runs one command with its output in a file and prints the largest resident
# set (KB) of it and everything it waited for.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE).returncode\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, input=stdin
    ).stdout.decode()


def base_repo(path: Path) -> str:
    """A repository with one commit on main, switched to owl/job-1; main's hash."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Bench")
    git(path, "config", "user.email", "bench@example.invalid")
    (path / "README").write_text("bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    base = git(path, "rev-parse", "HEAD").strip()
    git(path, "switch", "-q", "-c", "owl/job-1")
    return base


def sparse_job(path: Path, size: int) -> str:
    """(a): one commit adding a sparse file of `size` bytes."""
    base = base_repo(path)
    (path / "bin").mkdir()
    with open(path / "bin" / "data.img", "wb") as f:
        f.truncate(size)
    git(path, "-c", "core.compression=1", "-c", "pack.compression=1", "add", "-A")
    git(path, "commit", "-q", "-m", "a big sparse file")
    return base


def many_files_job(path: Path, count: int) -> str:
    """(b): one commit adding `count` small files, written by git fast-import."""
    base = base_repo(path)
    parent = git(path, "rev-parse", "HEAD").strip()
    lines = [
        b"commit refs/heads/owl/job-1",
        b"committer Bench <bench@example.invalid> 0 +0000",
        b"data 11",
        b"many files",
        b"from " + parent.encode(),
    ]
    for i in range(count):
        body = f"file {i}\nline two\n".encode()
        lines += [f"M 100644 inline d{i // 1000:03}/f{i:06}.txt".encode(), b"data %d" % len(body)]
        lines.append(body)
    git(path, "fast-import", "--quiet", stdin=b"\n".join(lines) + b"\n")
    git(path, "reset", "-q", "--hard", "owl/job-1")
    return base


def measure(argv: list[str], out: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(peak MB, seconds, exit code) of one command, its output into `out`."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(out), *argv],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    took = time.perf_counter() - t0
    code, kb = done.stdout.split()
    return int(kb) / 1024, took, int(code)


def bench(tmp: Path, name: str, base: str, repo: Path) -> list[float]:
    home = tmp / f"{name}-home"
    store = Store(home / "owl.db")
    jid = store.add_job(f"{name} job", str(repo), "claude", 1)
    store.set_job(jid, state="review", branch="owl/job-1", base=base, base_branch="main")
    store.close()
    env = dict(os.environ, OWL_HOME=str(home), PYTHONPATH=str(ROOT / "app"))
    peaks = []
    diff_out = tmp / f"{name}.diff"
    mb, took, code = measure([*OWL, "jobs", "diff", str(jid)], diff_out, env)
    peaks.append(mb)
    print(
        f"  {name:<14} owl jobs diff    peak {mb:8.1f} MB  {took:6.1f} s  exit {code}  "
        f"wrote {diff_out.stat().st_size / 1e6:.2f} MB"
    )
    mb, took, code = measure([*OWL, "jobs", "review", str(jid), "--no-open"], tmp / "out", env)
    peaks.append(mb)
    page = home / "reviews" / f"job-{jid}.html"
    size = page.stat().st_size / 1e6 if page.exists() else float("nan")
    print(
        f"  {name:<14} owl jobs review  peak {mb:8.1f} MB  {took:6.1f} s  exit {code}  "
        f"page {size:.2f} MB"
    )
    return peaks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="2G", help="the sparse file's size (default 2G)")
    ap.add_argument("--files", type=int, default=100_000, help="files of Job (b)")
    a = ap.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(a.size[:-1]) * units[a.size[-1]] if a.size[-1] in units else int(a.size)
    peaks: list[float] = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sparse = tmp / "sparse"
        name = f"{size / 1e9:.1f} GB file"
        peaks += bench(tmp, name, sparse_job(sparse, size), sparse)
        many = tmp / "many"
        peaks += bench(tmp, f"{a.files:,} files", many_files_job(many, a.files), many)
    worst = max(peaks)
    print(
        f"worst peak {worst:.1f} MB; target under {TARGET_MB} MB: {'met' if worst < TARGET_MB else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
