"""What the caps' watch adds to each pass over a live Run: a 100-process Run,
its sweep (the watch's `identities()`), then the sums the caps need (the
process count, RSS of every process) and, for a Run past its memory cap, the
PSS sum that names the figure.

The watch runs on the engine thread every second (every 0.2 s near the cap),
so the sums must cost little beside the sweep itself.

    python bench/caps_sweep.py [--trials 200] [--sessions 10] [--per 10]
"""

from __future__ import annotations

import statistics
import time


from owl import tree

# (the bench's folder is on the path: run as python bench/<name>.py)
from figures import sweep_bench


def ms(values: list[float]) -> str:
    s = sorted(v * 1000 for v in values)
    return f"median {statistics.median(s):6.3f} ms   p99 {s[int(0.99 * (len(s) - 1))]:6.3f} ms"


def main() -> int:
    with sweep_bench(__doc__.splitlines()[0]) as (args, tag, top):
        with tree.ProcessTree(("OWL_RUN_ID", tag), top) as run:
            run.identities()
            sweep, sums, pss = [], [], []
            for _ in range(args.trials):
                t0 = time.perf_counter()
                run.identities()
                t1 = time.perf_counter()
                pids = run.members()
                rss = tree.resident(pids, swap=tree.swapping())
                t2 = time.perf_counter()
                held = tree.proportional(pids)
                t3 = time.perf_counter()
                sweep.append(t1 - t0)
                sums.append(t2 - t1)
                pss.append(t3 - t2)
            print(f"  the sweep ({len(pids)} processes)       {ms(sweep)}")
            print(f"  count + RSS sum (every pass)     {ms(sums)}")
            print(f"  PSS sum (past the cap only)      {ms(pss)}")
            share = statistics.median(sums) / statistics.median(sweep)
            print(
                f"  RSS {rss / 2**20:.0f} MiB, PSS {held / 2**20:.0f} MiB: RSS counts "
                f"{rss / max(held, 1):.1f}x what the Run holds; "
                f"the sums add {share * 100:.0f} % to a sweep"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
