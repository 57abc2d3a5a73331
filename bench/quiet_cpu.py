"""The daemon's CPU while nothing happens, on every desktop: X11, mutter, kwin, sway.

For each desktop the real `owl daemon` reads the machine for itself (no manual
machine) and is measured twice, `--quiet` seconds each, from its own CPU time
(psutil cpu_times, every thread, in 10 ms clock ticks) and the kernel's
schedstat (run time in ns), judged on the latter:

  nothing queued          the machine idle, no Job
  a Job waiting, in use   idle.after is 1h and an input was just sent, so the
                          Job waits for the person to leave

Target: <= 0.02 % of one core in both, on every desktop: with nothing to do the
daemon sleeps until something can change (a config edit arrives through
inotify, the charger of a machine with no battery is looked at once a minute,
the engine wakes once a minute), so only events wake it.

    python bench/quiet_cpu.py [--quiet 60] [--only x11,mutter,kwin,sway]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from compositors import compositor, missing  # noqa: E402
from daemon_cpu import measure  # noqa: E402
from display import virtual_display  # noqa: E402
from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402

TARGET = 0.02
KINDS = ("x11", "mutter", "kwin", "sway")


@contextmanager
def desktop(kind: str) -> Iterator[tuple[dict[str, str], Callable[[], None]]]:
    """(the environment a daemon on that desktop has, a way to send one input)."""
    if kind == "x11":
        with virtual_display(dbus=False) as xenv:
            from Xlib import X
            from Xlib import display as xdisplay
            from Xlib.ext import xtest

            conn = xdisplay.Display(xenv.display)

            def move() -> None:
                xtest.fake_input(conn, X.MotionNotify, x=300, y=300)
                conn.sync()

            try:
                yield dict(xenv), move
            finally:
                conn.close()
        return
    with compositor(kind) as c:
        send = getattr(c, "ipc_move", None)
        yield dict(c.env), ((lambda: send(0)) if send else c.move)


def measure_desktop(kind: str, tmp: Path, seconds: float) -> list[tuple[str, float, float]]:
    project = make_project(tmp / "project")
    rows = []
    with desktop(kind) as (env, move):
        d = OwlDaemon(
            tmp / "home", {"idle": {"after": "2s", "require_ac_power": True}}, manual=False, env=env
        )
        d.env.pop("OWL_MACHINE", None)
        if kind != "x11":
            d.env.pop("DISPLAY", None)
        with d:
            proc = psutil.Process(d.proc.pid)
            wait_for(lambda: d.status()["machine"]["idle"], timeout=20, what="idle")
            time.sleep(1.0)
            ticks, _, per = measure(proc, seconds)
            rows.append(("nothing queued", ticks, sum(per.values())))
            cfg = tomllib.loads((d.home / "config.toml").read_text())
            cfg["idle"]["after"] = "1h"
            d.write_config(cfg)
            wait_for(
                lambda: (
                    (d.status()["machine"].get("idle_in_s") or 0) > 3000
                    or not d.status()["machine"]["idle"]
                ),
                timeout=20,
                what="idle.after = 1h",
            )
            move()
            wait_for(lambda: d.status()["machine"]["idle"] is False, timeout=20, what="in use")
            d.add("sleep=30", project)
            time.sleep(1.0)
            ticks, _, per = measure(proc, seconds)
            rows.append(("a Job waiting, in use", ticks, sum(per.values())))
            if d.status()["runs"]:
                raise SystemExit("a Run started although the machine was in use")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", type=float, default=60.0, help="seconds per phase")
    ap.add_argument("--only", default=",".join(KINDS), help="desktops, comma-separated")
    args = ap.parse_args()
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"{args.quiet:.0f} s per phase; target <= {TARGET} % of one core"
    )
    worst_all = 0.0
    for kind in [k for k in args.only.split(",") if k]:
        if kind != "x11" and missing(kind):
            print(f"{kind}: not installed: {', '.join(missing(kind))}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            rows = measure_desktop(kind, Path(tmp), args.quiet)
        for name, ticks, fine in rows:
            # Judged on schedstat: the kernel's run time in ns. The clock-tick
            # figure charges a whole 10 ms tick to whoever runs when it lands,
            # so over 60 s its step (0.017 %) is as coarse as the target itself.
            worst = fine
            worst_all = max(worst_all, worst)
            print(
                f"  {kind:<7} {name:<24} {ticks:6.3f} % (schedstat {fine:6.3f} %)   "
                f"{'ok' if worst <= TARGET else 'OVER TARGET'}"
            )
    return 0 if worst_all <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
