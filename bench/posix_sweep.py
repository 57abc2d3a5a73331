"""What the macOS orphan rule costs a sweep: the portable (posix) backend,
with and without its session/group bookkeeping (posix.Kin), on a
100-process tree spread over 10 sessions.

The posix backend is what macOS uses; Kin reads each live member's session
and process group on every sweep so that an untagged orphan of launchd can
be recognised. Target: it adds no more than 10 % to a sweep.

    python bench/posix_sweep.py [--trials 200] [--sessions 10] [--per 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import types
import uuid

import psutil

from owl import tree
from owl.tree import posix

AGENT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "agents", "tree_agent.py"
)


def until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the tree")
        time.sleep(0.01)


def without_kin() -> types.ModuleType:
    b = types.ModuleType("posix_without_kin")
    b.__dict__.update({k: v for k, v in vars(posix).items() if not k.startswith("__")})
    b.Kin = None
    return b


def timed(run: tree.ProcessTree, trials: int) -> list[float]:
    out = []
    for _ in range(trials):
        t0 = time.perf_counter()
        run.alive()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--per", type=int, default=10)
    args = ap.parse_args()
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    total = args.sessions * args.per
    with tempfile.TemporaryDirectory() as ready:
        popen = tree.spawn(
            [
                sys.executable,
                AGENT,
                "--ready",
                ready,
                "--fanout",
                str(args.sessions),
                str(args.per),
            ],
            cwd=ready,
            env=dict(os.environ, OWL_RUN_ID=tag),
            stdout=None,
            stderr=None,
            nice=10,
        )
        try:
            until(lambda: len([n for n in os.listdir(ready) if not n.endswith(".tmp")]) >= total)
            print(
                f"tree: {total} processes in {args.sessions} sessions, "
                f"{len(psutil.pids())} processes on the machine, {os.cpu_count()} cores, "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            # Trials alternate between the two, so load drifts hit both alike.
            runs = {
                label: tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid, backend=b)
                for label, b in (("posix without Kin", without_kin()), ("posix with Kin", posix))
            }
            times: dict[str, list[float]] = {label: [] for label in runs}
            for run in runs.values():
                run.alive()
            for _ in range(args.trials):
                for label, run in runs.items():
                    times[label] += timed(run, 1)
            medians = {}
            for label, values in times.items():
                ms = sorted(v * 1000 for v in values)
                medians[label] = statistics.median(ms)
                print(
                    f"  sweep, {label:<18} median {medians[label]:6.2f} ms   "
                    f"p99 {ms[int(0.99 * (len(ms) - 1))]:6.2f} ms"
                )
                runs[label].close()
            extra = medians["posix with Kin"] / medians["posix without Kin"] - 1
            print(f"  Kin adds {extra * 100:+.1f} % to the median sweep (target <= 10 %)")
        finally:
            with tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid) as run:
                run.kill()
            popen.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
