"""Input to every process of a live Run stopped, while another Job's setup hangs in git.

The real `owl daemon` runs two Jobs (runs.max_parallel = 2): the first one's
Run is live (an agent and a child in a session of its own, under the Run's
reaper), the second one's worktree setup hangs in a slow git (a `git` on the
daemon's PATH that sleeps after `worktree add`, as a slow post-checkout hook
or a huge checkout would). Each trial sends "input" through the control
socket (the manual machine, so the moment is exact) and spins reading
/proc/<pid>/stat of the Run's processes until every one is stopped; then it
sends "idle" and waits for the thaw. Target: p99 <= 20 ms.

    python bench/setup_freeze.py [--trials 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from owlproc import SocketOwl, make_project, wait_for  # noqa: E402
from support.slowgit import SlowGit  # noqa: E402


def state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return "X"
    return chr(data[data.rfind(b")") + 2])


def run_pids(d: SocketOwl, job: int) -> list[int]:
    """The Run's processes: the agent's, its child's and the reaper's."""
    import psutil

    run = d.run_of(job)
    assert run is not None
    pids = set(run["pids"])
    for pid in list(pids):
        try:
            pids.add(psutil.Process(pid).ppid())
        except psutil.Error:
            pass
    return sorted(p for p in pids if p != os.getpid() and p != d.proc.pid and p > 1)


def spin(cond, timeout: float = 5.0) -> float:
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            raise SystemExit("timed out waiting for the Run's processes")
    return time.perf_counter()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument(
        "--no-setup", action="store_true", help="the same without the hanging setup, for comparison"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        slow = SlowGit(tmp_path / "bin")
        project = make_project(tmp_path / "proj")
        d = SocketOwl(
            tmp_path / "home",
            {
                "idle": {"after": "200ms"},
                "runs": {"max_parallel": 2},
                "interruption": {"grace_window": "10m"},
            },
            env={"PATH": slow.path()},
        )
        d.start()
        try:
            first = d.add("setsid-child=600 tick=0.2 sleep=600", project)
            d.machine("idle")
            d.wait_run(first, "running")
            wait_for(lambda: len(d.agent_pids()) == 2, what="the agent and its child")
            second = None
            if not args.no_setup:
                slow.slow(600)
                second = d.add("sleep=600", project)
                wait_for(
                    lambda: _setting_up(d, second), timeout=10, what="the second setup to hang"
                )
            wait_for(lambda: len(d.run_of(first)["pids"]) >= 2, what="the Run's pids listed")
            pids = run_pids(d, first)
            figures = []
            for _ in range(args.trials):
                t0 = time.perf_counter()
                d.machine("input")
                t1 = spin(lambda: all(state(p) in "TX" for p in pids))
                figures.append((t1 - t0) * 1000)
                d.machine("idle")
                spin(lambda: all(state(p) not in "T" for p in pids), timeout=10)
                time.sleep(0.05)
            assert second is None or _setting_up(d, second), "the setup ended during the bench"
        finally:
            slow.slow(None)
            d.proc.terminate()
            d.proc.wait(15)
            d.kill_leftovers()
    figures.sort()
    p50 = statistics.median(figures)
    p99 = figures[min(len(figures) - 1, int(len(figures) * 0.99))]
    how = "without a setup" if args.no_setup else "with a setup hanging in git"
    print(
        f"input -> all {len(pids)} processes stopped, {how} "
        f"({len(figures)} trials): p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {figures[-1]:.1f} ms"
    )
    ok = p99 <= 20.0
    print("target p99 <= 20 ms:", "met" if ok else "NOT met")
    return 0 if ok else 1


def _setting_up(d: SocketOwl, job: int) -> bool:
    """The Job's setup began and has not come back (no Run, not blocked)."""
    return (
        f"job {job}: setting up" in d.log_text()
        and d.run_of(job) is None
        and d.job(job)["state"] == "pending"
    )


if __name__ == "__main__":
    sys.exit(main())
