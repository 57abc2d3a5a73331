"""The kill guarantee through the real daemon: grace window + 5 s + 250 ms.

Each trial queues a Job whose agent ignores SIGTERM and starts two children in
sessions of their own (also ignoring SIGTERM), lets it run, then says the
person is back (`owl machine input`, the daemon driven by hand). With a 1 s
grace window the daemon must ask the tree to stop when the window passes and
kill whatever is left 5 s later. The bench watches every pid itself and
reports, per trial, the time from the input to the last process gone.

Target: every process gone within 1 s + 5 s + 250 ms, in all trials.

    python bench/kill_daemon.py [--trials 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402

GRACE = 1.0
LIMIT = GRACE + 5.0 + 0.25


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp) / "proj")
        cfg = {"interruption": {"grace_window": f"{GRACE:g}s"}}
        times: list[float] = []
        with OwlDaemon(Path(tmp) / "home", cfg) as d:
            for trial in range(args.trials):
                d.pids_file.unlink(missing_ok=True)
                job = d.add("trap-term setsid-child=600 setsid-child=600 sleep=600", project)
                d.machine("idle")
                d.wait_run(job, "running")
                wait_for(lambda: len(d.agent_pids()) == 3, what="the agent and its children")
                pids = d.agent_pids()
                t0 = time.monotonic()
                d.machine("input")
                while not gone(pids):
                    time.sleep(0.005)
                times.append(time.monotonic() - t0)
                run = d.job(job)["runs"][-1]
                print(
                    f"trial {trial + 1:>2}: {times[-1]:.3f} s, ended_by {run['ended_by']}",
                    flush=True,
                )
                d.ok("jobs", "drop", str(job), "--force")
        within = sum(t <= LIMIT for t in times)
        print(
            f"\nfrom input to every process gone, grace {GRACE:g} s: "
            f"median {statistics.median(times):.3f} s, max {max(times):.3f} s; "
            f"{within}/{len(times)} within {LIMIT:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
