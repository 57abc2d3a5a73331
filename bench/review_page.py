"""How long `owl jobs review` takes to write the page of a small and of a large Job.

The Jobs are real git branches: a small one (one file, a few lines) and a
large one (every Python file of Owl's own package added at once, about 0.7 MB
of code, past the page's 500 KB cap and its colour budget). Each is timed
end to end through `owl.review.write_page` (the database read, git log and
diff, Pygments, the HTML written), median of --trials. Prints seconds and the
page's size. Target: the large Job's page in under 5 s on two busy cores.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))

from owl.settings.paths import Paths  # noqa: E402
from owl.review import write_page  # noqa: E402
from owl.store.db import Store  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def project(path: Path, files: dict[str, str]) -> tuple[str, str]:
    """A repository with one commit on main and `files` committed on owl/job-1."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Bench")
    git(path, "config", "user.email", "bench@example.invalid")
    (path / "README").write_text("bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    base = git(path, "rev-parse", "HEAD")
    git(path, "switch", "-q", "-c", "owl/job-1")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "the Job's work")
    return base, "owl/job-1"


def time_page(tmp: Path, name: str, files: dict[str, str], trials: int) -> tuple[float, int]:
    repo = tmp / name
    base, branch = project(repo, files)
    home = tmp / f"{name}-home"
    paths = Paths(
        config=home / "config.toml",
        db=home / "owl.db",
        socket=home / "s",
        logs=home / "logs",
        worktrees=home / "wt",
        runtime=home / "run",
    )
    store = Store(paths.db)
    jid = store.add_job(f"{name} job", str(repo), "claude", 1)
    store.set_job(jid, state="review", branch=branch, base=base, base_branch="main")
    store.close()
    took = []
    for _ in range(trials):
        t0 = time.perf_counter()
        page = write_page(paths, jid)
        took.append(time.perf_counter() - t0)
    return statistics.median(took), page.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    a = ap.parse_args()
    small = {"hello.py": 'def greet(name):\n    return f"Hello, {name}!"\n'}
    large = {
        str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "app/owl").rglob("*.py"))
    }
    size = sum(len(t) for t in large.values())
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in (("small", small), ("large", large)):
            median, page = time_page(Path(tmp), name, files, a.trials)
            print(
                f"{name:5}  {len(files):4} files  {sum(len(t) for t in files.values()) / 1e6:5.2f} MB "
                f"of code  page in {median:.2f} s (median of {a.trials})  page {page / 1e6:.1f} MB"
            )
    print(f"target: the large Job ({size / 1e6:.1f} MB of diff) under 5 s")


if __name__ == "__main__":
    main()
