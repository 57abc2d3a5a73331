"""How long the scheduler takes to decide, with 10,000 queued Jobs in 100 projects.

A decision is what the engine does when it may start something: ask the real
SQLite store for the head of the queue and the first runnable Job, with the
caps applied by `scheduler.decide`.
Two shapes: the head of the queue can start (the common case), and every
project but the last is at its cap while the last project's Jobs are the last
100 in the queue (the worst case: 9,900 Jobs are passed over). Prints median and p90 in milliseconds. Target: median ≤ 5 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))

from owl.rules.scheduler import QueuedJob, decide  # noqa: E402
from owl.store.db import Store  # noqa: E402

JOBS, PROJECTS, TRIALS = 10_000, 100, 200


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "owl.db")
        with store.tx():
            for i in range(JOBS):
                # in blocks, so the last project's Jobs are the last 100 in the queue
                store.add_job(f"job {i}", f"/code/p{i * PROJECTS // JOBS}", "claude", 3)
        # the last project's Jobs are the only ones not capped in the worst case
        capped = {f"/code/p{i}": 1 for i in range(PROJECTS - 1)}

        def first(skip: set[str] = set()) -> QueuedJob | None:
            row = store.first_pending(skip)
            return QueuedJob(*row) if row else None

        def one_decision(live: list[str], caps: dict[str, int]) -> QueuedJob | None:
            # exactly what Engine.decide does
            return decide(first(), first, live, max_parallel=1000, project_cap=caps.get).job

        for name, live, caps in (
            ("head can start", [], {}),
            ("99 of 100 projects at their cap,", list(capped), capped),
        ):
            times = []
            for _ in range(TRIALS):
                t0 = time.perf_counter()
                job = one_decision(live, caps)
                times.append((time.perf_counter() - t0) * 1000)
            assert job is not None
            times.sort()
            print(
                f"{name:<34} median {statistics.median(times):6.2f} ms   "
                f"p90 {times[int(len(times) * 0.9)]:6.2f} ms   ({JOBS} jobs, {PROJECTS} projects)"
            )
        store.close()


if __name__ == "__main__":
    main()
