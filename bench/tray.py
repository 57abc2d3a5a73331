"""What the tray costs while it waits: RSS and CPU of the tray process.

Starts a virtual desktop (Xvfb, trayer, dunst), runs Owl's tray over the
stand-in daemon of tests/traydesk.py with its shipped refresh period, lets
it settle, then measures CPU time used over a window (default 30 s) and the
resident memory at the end. Targets: RSS <= 80 MB, CPU <= 0.2 % of a core
with nothing running. `--state frozen` measures a countdown instead (the
icon redraws every second then).

    .venv/bin/python bench/tray.py [--seconds 30] [--state idle|frozen] [--json]

Exits 1 when a target is missed (idle state only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from display import virtual_display  # noqa: E402
from traydesk import FROZEN, IDLE, find_tray_icon  # noqa: E402

from owl.tray.app import SLOW_S  # noqa: E402

RSS_TARGET_MB = 80.0
CPU_TARGET_PCT = 0.2


def measure(seconds: float, state: str) -> dict:
    status = {"idle": IDLE, "frozen": FROZEN}[state]
    if state == "frozen":
        status = json.loads(json.dumps(status))
        status["runs"][0]["grace_left_s"] = 1e6  # stays frozen for the whole window
    with virtual_display(tray=True, notify=True) as env, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "status.json").write_text(json.dumps(status))
        env = dict(env, OWL_HOME=str(folder / "owl-home"), XDG_CONFIG_HOME=str(folder / "config"))
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "traydesk.py"),
                str(folder / "status.json"),
                str(folder / "calls.jsonl"),
                str(SLOW_S),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            find_tray_icon(env)
            docked_s = time.monotonic() - started
            p = psutil.Process(proc.pid)
            time.sleep(2.0)  # let start-up work finish before the window opens
            t0, c0 = time.monotonic(), p.cpu_times()
            time.sleep(seconds)
            t1, c1 = time.monotonic(), p.cpu_times()
            mem = p.memory_full_info()
            threads = p.num_threads()
        finally:
            proc.terminate()
            proc.wait(10)
    cpu = (c1.user + c1.system) - (c0.user + c0.system)
    return {
        "state": state,
        "window_s": round(t1 - t0, 1),
        "start_to_docked_s": round(docked_s, 2),
        "cpu_pct_of_a_core": round(100.0 * cpu / (t1 - t0), 3),
        "rss_mb": round(mem.rss / 2**20, 1),
        "uss_mb": round(mem.uss / 2**20, 1),
        "threads": threads,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--state", choices=["idle", "frozen"], default="idle")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = measure(args.seconds, args.state)
    ok = result["rss_mb"] <= RSS_TARGET_MB and result["cpu_pct_of_a_core"] <= CPU_TARGET_PCT
    result["targets"] = {"rss_mb": RSS_TARGET_MB, "cpu_pct_of_a_core": CPU_TARGET_PCT, "met": ok}
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")
    return 0 if ok or args.state != "idle" else 1


if __name__ == "__main__":
    raise SystemExit(main())
