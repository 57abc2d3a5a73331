"""Freeze and thaw latency of a 100-process tree spread over 10 sessions.

Latency is measured from the call to the moment every process of the tree
is seen stopped (freeze) or no longer stopped (thaw), checked here by
reading each process's state independently of the module under test.

"warm" reuses one ProcessTree that is swept before each trial, as the
daemon's watch does every second (every process known, the table read in
full recently); "cold" builds a new one per trial from the agent's pid
alone (a tree never swept: the whole table is read, more than once).

Target: freeze median <= 10 ms, p99 <= 50 ms. A stop takes effect only
when the process next runs, so on a busy machine the Run's low priority
(nice) shows in the "seen stopped" figures; the CPU time of the call is
what the sweep itself costs.

    python bench/freeze.py [--trials 200] [--sessions 10] [--per 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

import psutil

from owl import tree

# (the bench's folder is on the path: run as python bench/<name>.py)
from figures import fanout_argv, ready_pids, report, spawned_tree, spin_until, state


def trial(run: tree.ProcessTree, pids: list[int], out: dict[str, list[float]]) -> None:
    c0 = time.thread_time()
    t0 = time.perf_counter()
    frozen = run.freeze()
    t1 = time.perf_counter()
    c1 = time.thread_time()
    t2 = spin_until(lambda: all(state(p) == "T" for p in pids))
    assert frozen == len(pids), (frozen, len(pids))
    out["freeze: CPU time of the call"].append(c1 - c0)
    out["freeze returned"].append(t1 - t0)
    out["freeze, all seen stopped"].append(t2 - t0)
    time.sleep(0.002)
    t0 = time.perf_counter()
    run.thaw()
    t1 = time.perf_counter()
    t2 = spin_until(lambda: all(state(p) != "T" for p in pids))
    out["thaw returned"].append(t1 - t0)
    out["thaw, all seen running"].append(t2 - t0)
    time.sleep(0.005)


KEYS = (
    "freeze: CPU time of the call",
    "freeze returned",
    "freeze, all seen stopped",
    "thaw returned",
    "thaw, all seen running",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--per", type=int, default=10)
    ap.add_argument("--nice", type=int, default=10)
    args = ap.parse_args()

    tree.become_subreaper()
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    total = args.sessions * args.per
    with tempfile.TemporaryDirectory() as ready:
        argv = fanout_argv(ready, args.sessions, args.per)
        with spawned_tree(argv, tag, ready, dict(os.environ), nice=args.nice) as top:
            pids = ready_pids(ready, total)
            sessions = {os.getsid(p) for p in pids}
            print(
                f"tree: {len(pids)} processes in {len(sessions)} sessions at nice "
                f"{args.nice}, {len(psutil.pids())} processes on the machine, "
                f"backend {tree.BACKEND}, {os.cpu_count()} cores, "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            for label, fresh in (("warm", False), ("cold", True)):
                out: dict[str, list[float]] = {k: [] for k in KEYS}
                run = tree.ProcessTree(("OWL_RUN_ID", tag), top)
                run.sweep()
                for _ in range(args.trials):
                    if fresh:
                        run.close()
                        run = tree.ProcessTree(("OWL_RUN_ID", tag), top)
                    else:
                        run.identities()  # the daemon's watch does this every second
                    trial(run, pids, out)
                run.close()
                print(f"{label} ({args.trials} trials):")
                for name, values in out.items():
                    report(name, values, width=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
