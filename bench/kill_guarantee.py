"""The guarantee behind the grace window: SIGTERM, 5 s, SIGKILL, and then
nothing of the Run is left.

Each trial starts a hostile tree (every process ignores SIGTERM; children in
new sessions; an orphan adopted by this process as subreaper; a child that
keeps starting short-lived children in new sessions), freezes it, and then
does what the daemon does when the window expires: term(), wait 5 s,
kill(). It reports the time from term() until every process is gone
(checked here, independently of the module under test).

Target: every process gone within 5 s + 250 ms of term().

    python bench/kill_guarantee.py [--trials 20] [--wait 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

import psutil

from owl import tree

AGENT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "agents", "tree_agent.py"
)
FLAGS = ["--ignore-term", "--setsid", "3", "--orphan", "--churn"]
EXPECT = {"agent": 1, "sess": 3, "sessgc": 3, "orphan": 1, "churner": 1}


def roles(ready: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name in os.listdir(ready):
        if not name.endswith(".tmp"):
            role, _, pid = name.rpartition("-")
            out.setdefault(role, []).append(int(pid))
    return out


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def until(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the tree")
        time.sleep(0.005)


def trial(wait: float) -> dict[str, float]:
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as ready:
        popen = tree.spawn(
            [sys.executable, AGENT, "--ready", ready, *FLAGS],
            cwd=ready,
            env=dict(os.environ, OWL_RUN_ID=tag),
            stdout=None,
            stderr=None,
        )
        until(lambda: all(len(roles(ready).get(r, ())) >= n for r, n in EXPECT.items()), 30)
        pids = [p for ps in roles(ready).values() for p in ps]
        run = tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid)
        frozen = run.freeze()

        t_term = time.perf_counter()
        run.term()
        time.sleep(max(0.0, t_term + wait - time.perf_counter()))
        survived_term = sum(not gone(p) for p in pids)
        t_kill = time.perf_counter()
        killed = run.kill()
        t_returned = time.perf_counter()
        while not all(gone(p) for p in pids):
            if time.perf_counter() - t_kill > 10:
                raise SystemExit("processes survived kill()")
            time.sleep(0.0005)
        t_gone = time.perf_counter()

        popen.wait(5)
        tree.reap_orphans(lambda pid: False)
        left = tree.find_survivors("OWL_RUN_ID", [tag])
        if left:
            tree.kill_processes(left)
            raise SystemExit(f"left behind: {[p.pid for p in left]}")
        return {
            "frozen": frozen,
            "survived_term": survived_term,
            "killed": killed,
            "kill_call": t_returned - t_kill,
            "term_to_gone": t_gone - t_term,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--wait", type=float, default=5.0)
    args = ap.parse_args()
    tree.become_subreaper()
    print(
        f"{args.trials} trials: {' '.join(FLAGS)}; term(), {args.wait:g} s, kill(); "
        f"backend {tree.BACKEND}, {os.cpu_count()} cores"
    )
    results = []
    for i in range(args.trials):
        r = trial(args.wait)
        results.append(r)
        print(
            f"  trial {i + 1:2}: froze {r['frozen']:3}, {r['survived_term']} survived TERM, "
            f"killed {r['killed']:3}; kill() {r['kill_call'] * 1000:6.1f} ms; "
            f"term -> all gone {r['term_to_gone']:.3f} s",
            flush=True,
        )
    gone_after = [r["term_to_gone"] for r in results]
    kill_ms = [r["kill_call"] * 1000 for r in results]
    limit = args.wait + 0.25
    print(
        f"kill() call:        median {statistics.median(kill_ms):6.1f} ms, "
        f"max {max(kill_ms):6.1f} ms"
    )
    print(
        f"term -> all gone:   median {statistics.median(gone_after):.3f} s, "
        f"max {max(gone_after):.3f} s (target <= {limit:.2f} s: "
        f"{'met' if max(gone_after) <= limit else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
