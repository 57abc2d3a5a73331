"""The real daemon's CPU use while nothing happens, and under a storm of mouse moves.

`owl daemon` runs with the real input hooks on a throw-away Xvfb. Its CPU
time (psutil cpu_times, every thread of the process) is read before and after
each phase and given as a percentage of one core:

  nothing queued      quiet for --quiet s (the machine goes idle), then
                      --rate mouse moves a second for --storm s
  queued, in use      a Job waits (idle.after is 1h, so the machine stays in
                      use): quiet, then the same storm

Moves are XTEST motion events sent from this process (what xdotool sends,
without starting a process per move). Targets: quiet <= 0.2 %, storm <= 3 %.

    python bench/daemon_cpu.py [--quiet 60] [--storm 10] [--rate 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from display import virtual_display  # noqa: E402
from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402

QUIET_TARGET = 0.2
STORM_TARGET = 3.0


def cpu(proc: psutil.Process) -> float:
    """CPU seconds of every thread (psutil's user + system: clock ticks, 10 ms)."""
    t = proc.cpu_times()
    return t.user + t.system


def threads(pid: int) -> dict[str, float]:
    """On-CPU seconds per thread name, from /proc/<pid>/task/*/schedstat (nanoseconds).

    Finer than cpu_times' ticks, and it says which thread the time went to."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        # Python does not name its threads for the kernel: tell them apart by tid.
        key = "main thread" if tid == str(pid) else f"{name} thread {tid}"
        out[key] = out.get(key, 0.0) + ns / 1e9
    return out


def measure(
    proc: psutil.Process, seconds: float, during=None
) -> tuple[float, float, dict[str, float]]:
    """(% of one core, wall seconds, % per thread) the process used over `seconds`."""
    c0, s0, t0 = cpu(proc), threads(proc.pid), time.monotonic()
    if during is None:
        time.sleep(seconds)
    else:
        during(seconds)
    c1, s1, t1 = cpu(proc), threads(proc.pid), time.monotonic()
    wall = t1 - t0
    per = {k: 100.0 * (v - s0.get(k, 0.0)) / wall for k, v in s1.items()}
    return 100.0 * (c1 - c0) / wall, wall, per


class Storm:
    """Mouse moves at a steady rate through XTEST on one X connection."""

    def __init__(self, display: str, rate: int) -> None:
        from Xlib import display as xdisplay

        self.conn = xdisplay.Display(display)
        self.rate = rate
        self.sent = 0

    def __call__(self, seconds: float) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        start = time.perf_counter()
        end = start + seconds
        n = 0
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            due = int((now - start) * self.rate) + 1
            while n < due:
                xtest.fake_input(self.conn, X.MotionNotify, x=200 + n % 400, y=300 + n % 2)
                n += 1
            self.conn.flush()
            time.sleep(0.001)
        self.conn.sync()
        self.sent += n

    def close(self) -> None:
        self.conn.close()


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER TARGET"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", type=float, default=60.0, help="seconds of quiet per phase")
    ap.add_argument("--storm", type=float, default=10.0, help="seconds of storm per phase")
    ap.add_argument("--rate", type=int, default=1000, help="mouse moves a second")
    args = ap.parse_args()
    if shutil.which("Xvfb") is None:
        raise SystemExit("not installed: Xvfb")

    rows: list[tuple[str, tuple[float, float, dict[str, float]], float]] = []
    with tempfile.TemporaryDirectory() as tmp, virtual_display(dbus=False) as xenv:
        tmpdir = Path(tmp)
        project = make_project(tmpdir / "project")
        d = OwlDaemon(
            tmpdir / "home",
            {
                "idle": {"after": "2s", "require_ac_power": True},
                "interruption": {"grace_window": "1h"},
            },
            manual=False,
            env=dict(xenv),
        )
        d.env.pop("OWL_MACHINE", None)
        storm = Storm(xenv.display, args.rate)
        with d:
            proc = psutil.Process(d.proc.pid)
            detectors = d.status()["machine"]["detectors"]
            print(
                f"daemon pid {proc.pid}, {proc.num_threads()} threads, detectors "
                f"{', '.join(detectors)}; {os.cpu_count()} cores, load average "
                f"{os.getloadavg()[0]:.1f}"
            )
            if "pynput-x11" not in detectors:
                raise SystemExit("the input hooks are not running: nothing to measure")

            # Phase 1: nothing queued. Let start-up settle and the machine go idle.
            wait_for(lambda: d.status()["machine"]["idle"], timeout=15, what="idle")
            time.sleep(1.0)
            rows.append(("nothing queued", measure(proc, args.quiet), QUIET_TARGET))
            rows.append(
                (
                    f"nothing queued, {args.rate} moves/s",
                    measure(proc, args.storm, storm),
                    STORM_TARGET,
                )
            )

            # Phase 2: a Job waits while the machine is in use (idle.after 1h).
            cfg = tomllib.loads((d.home / "config.toml").read_text())
            cfg["idle"]["after"] = "1h"
            d.write_config(cfg)
            wait_for(
                lambda: (
                    (m := d.status()["machine"])["idle"] is False and (m["idle_in_s"] or 0) > 3000
                ),
                timeout=15,
                what="idle.after = 1h",
            )
            job = d.add("sleep=30", project)
            st = d.status()
            assert st["runs"] == [] and d.job(job)["state"] == "pending", st
            time.sleep(1.0)
            rows.append(("queued, in use", measure(proc, args.quiet), QUIET_TARGET))
            rows.append(
                (
                    f"queued, in use, {args.rate} moves/s",
                    measure(proc, args.storm, storm),
                    STORM_TARGET,
                )
            )
            if d.status()["runs"]:
                raise SystemExit("a Run started although the machine was in use")
            storm.close()

    print(f"moves sent: {storm.sent} ({storm.sent / (2 * args.storm):.0f}/s)")
    print("daemon CPU, % of one core:")
    for name, (pct, wall, per), target in rows:
        fine = sum(per.values())
        print(
            f"  {name:<36} {pct:6.3f} % (schedstat {fine:6.3f} %) over {wall:5.1f} s   "
            f"target <= {target} %: {verdict(max(pct, fine), target)}"
        )
        busy = sorted(((v, k) for k, v in per.items() if v >= 0.005), reverse=True)
        if busy:
            print("      " + ", ".join(f"{k} {v:.3f} %" for v, k in busy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
