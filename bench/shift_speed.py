"""A CPU-bound agent's throughput while the person works, beside while nobody does.

A Shift's Runs and a Run started with `owl start` are not frozen by input:
they must also not be slowed by it. The real `owl daemon` reads a throw-away
Xvfb (pynput's hooks, the screensaver reader) and runs one Run of a
CPU-bound agent: one worker per core, each counting loop turns and writing
its count every 0.2 s. Phases alternate: nobody at the machine (no input),
then the person working (pointer motions through XTEST, `--rate` a second,
from a thread of this process). Each phase's throughput is the workers'
turns a second summed; the figure is the median over the rounds of each
round's "working" over its "away" (neighbours in time, so the machine's own
drift, which is as large as the effect, cancels), for a Run of a Shift and
for one of `owl start`.

Only input is the person's here: a person who also compiles takes CPU the
agent then does not get (the Run is at `runs.nice`), which is meant.

Target: the ratio >= 0.95 for both.

    python bench/shift_speed.py [--phase 3] [--rounds 8] [--rate 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from display import virtual_display  # noqa: E402
from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402

TARGET = 0.95

COUNTER = r"""
import os, sys, time
out = sys.argv[1]
workers = os.cpu_count() or 1
for i in range(workers - 1):
    if os.fork() == 0:
        break
else:
    i = workers - 1
n, mark = 0, time.monotonic()
with open(f"{out}.{i}", "w") as f:
    while True:
        for _ in range(20000):
            n += 1
        now = time.monotonic()
        if now - mark >= 0.2:
            f.write(f"{now:.6f} {n}\n")
            f.flush()
            mark = now
"""


def samples(out: Path) -> list[list[tuple[float, int]]]:
    """Each worker's (time, turns) samples so far."""
    rows = []
    for f in sorted(out.parent.glob(out.name + ".*")):
        worker = []
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                worker.append((float(parts[0]), int(parts[1])))
        rows.append(worker)
    return rows


def rate(out: Path, t0: float, t1: float) -> float:
    """Turns a second between t0 and t1, summed over the workers."""
    total = 0.0
    for worker in samples(out):
        inside = [s for s in worker if t0 <= s[0] <= t1]
        if len(inside) >= 2:
            (a, na), (b, nb) = inside[0], inside[-1]
            total += (nb - na) / (b - a)
    return total


class Person:
    """Pointer motions through XTEST at `rate` a second while on."""

    def __init__(self, display: str, rate: float) -> None:
        from Xlib import display as xdisplay

        self.conn = xdisplay.Display(display)
        self.every = 1.0 / rate
        self.on = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        i = 0
        while not self.done.is_set():
            if self.on.wait(0.1):
                xtest.fake_input(self.conn, X.MotionNotify, x=300 + (i % 2) * 50, y=300)
                self.conn.sync()
                i += 1
                time.sleep(self.every)

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self.conn.close()


def measure(how: str, args: argparse.Namespace, tmp: Path) -> tuple[list[float], list[float]]:
    """(away rates, working rates) of one Run started `how` ("shift" or "start")."""
    project = make_project(tmp / "project")
    out = tmp / "turns"
    counter = tmp / "counter.py"  # a file: the command's words are templates
    counter.write_text(COUNTER)
    with virtual_display(dbus=False) as xenv:
        cfg = {
            "idle": {"after": "1s", "require_ac_power": False},
            "interruption": {"grace_window": "1h"},
            "runs": {"stall": "1h"},
            "agents": {"counter": {"command": [sys.executable, str(counter), "{prompt}"]}},
            "agent": {"default": "counter"},
        }
        d = OwlDaemon(tmp / "home", cfg, manual=False, env=dict(xenv), agent=False)
        d.env.pop("OWL_MACHINE", None)
        person = Person(xenv.display, args.rate)
        try:
            with d:
                person.on.set()  # at the machine: only a Shift or `owl start` runs now
                if how == "shift":
                    d.ok("shift", "start", "--for", "1h")
                    d.add(str(out), project)
                else:
                    d.add(str(out), project)
                    d.ok("start")
                wait_for(lambda: len(samples(out)) == (os.cpu_count() or 1), 30, what="workers")
                away: list[float] = []
                working: list[float] = []
                for _ in range(args.rounds):
                    for on, into in ((False, away), (True, working)):
                        (person.on.set if on else person.on.clear)()
                        time.sleep(1.5)  # past idle.after: the daemon sees the machine change
                        t0 = time.monotonic()
                        time.sleep(args.phase)
                        into.append(rate(out, t0, time.monotonic()))
                [run] = d.status()["runs"]
                if run["state"] != "running":
                    raise SystemExit(f"the Run is {run['state']}, not running")
        finally:
            person.close()
    return away, working


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", type=float, default=3.0, help="seconds of each phase")
    ap.add_argument("--rounds", type=int, default=8, help="away/working pairs per Run")
    ap.add_argument("--rate", type=float, default=100.0, help="pointer motions a second")
    args = ap.parse_args()
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"{args.rounds} rounds of {args.phase:g} s away and {args.phase:g} s working "
        f"({args.rate:g} motions/s)"
    )
    worst = 1.0
    for how in ("shift", "start"):
        with tempfile.TemporaryDirectory() as tmp:
            away, working = measure(how, args, Path(tmp))
        ratio = statistics.median(w / a for w, a in zip(working, away))
        worst = min(worst, ratio)
        print(
            f"  {how:<6} away median {statistics.median(away) / 1e6:7.2f} M turns/s, "
            f"working {statistics.median(working) / 1e6:7.2f} M turns/s: ratio {ratio:.3f}  "
            f"{'ok' if ratio >= TARGET else 'UNDER TARGET'}"
        )
    print(f"target: working / away >= {TARGET}")
    return 0 if worst >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
