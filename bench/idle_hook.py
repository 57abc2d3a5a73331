"""What idle detection costs: time per input event in the hook callback, and
CPU of a process running the monitor while nothing happens and under a storm
of mouse moves.

    .venv/bin/python bench/idle_hook.py               # 60 s quiet, 10 s storm
    .venv/bin/python bench/idle_hook.py --seconds 5 --storm-seconds 3

Runs on its own Xvfb (tests/display.py) driven by real xdotool input. The
monitor runs in a child process, looping the way the engine will (read the
machine, sleep `recheck_in`, wake on input), so the CPU figures are that
process's alone. Budgets: callback median <= 20 us, quiet <= 0.2 % of a core,
1,000 moves/s <= 3 %.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "app"))


# ------------------------------------------------------------------ the child


def child(after: float) -> None:
    """Run the monitor and an engine-like loop; answer "count" and "times" on stdin."""
    from owl.idle import IdleMonitor, Power, read_machine

    wake = threading.Event()
    events = 0
    durations: list[int] = []
    timing = False

    armed = False  # the engine cares about input only while the machine counts as idle

    def on_input() -> None:  # what the engine does: stamp, wake if armed
        nonlocal events
        events += 1
        if armed:
            wake.set()

    monitor = IdleMonitor(on_input)
    hook = monitor._hook_event

    def timed_hook(*args: object) -> None:
        # Only the callback path is timed; the perf_counter calls are outside it.
        if timing:
            t0 = time.perf_counter_ns()
            hook(*args)
            durations.append(time.perf_counter_ns() - t0)
        else:
            hook(*args)

    monitor._hook_event = timed_hook  # type: ignore[method-assign]
    monitor.start()
    if not monitor.hooks_live:
        print(f"error: hooks not live: {monitor.problem}", flush=True)
        return
    power = Power()

    def engine() -> None:
        nonlocal armed
        while True:
            state = read_machine(monitor, power, after=after, require_ac=True, now=time.monotonic())
            armed = state.idle
            wake.wait(state.recheck_in)
            wake.clear()

    threading.Thread(target=engine, daemon=True).start()
    print("ready " + ",".join(monitor.backends), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "count":
            print(events, flush=True)
        elif cmd == "time-on":
            durations.clear()
            timing = True
            print("ok", flush=True)
        elif cmd == "time-off":
            timing = False
            print(" ".join(map(str, durations)), flush=True)
    monitor.stop()


# ----------------------------------------------------------------- the parent


class Child:
    def __init__(self, env: dict, after: float) -> None:
        import psutil

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", "--after", str(after)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self.proc.stdout.readline().strip()
        if not first.startswith("ready"):
            raise SystemExit(f"monitor did not start: {first}")
        self.backends = first.split(" ", 1)[1]
        self.ps = psutil.Process(self.proc.pid)

    def ask(self, cmd: str) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def moves(env: dict, count: int, per_second: float) -> subprocess.Popen:
    """One xdotool process making `count` 1-px moves, paced in batches of 10."""
    args: list[str] = []
    batch = 10
    pause = batch / per_second
    for i in range(count):
        args += ["mousemove_relative", "--", "1" if i % 2 else "-1", "0"]
        if i % batch == batch - 1:
            args += ["sleep", f"{pause:.4f}"]
    return subprocess.Popen(["xdotool", *args], env=env, stdout=subprocess.DEVNULL)


def measure_cpu(child: Child, seconds: float) -> float:
    """Percent of one core used by the child over `seconds` of wall time."""
    c0, t0 = child.cpu(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (child.cpu() - c0) / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="quiet period measured")
    parser.add_argument("--storm-seconds", type=float, default=10.0, help="storm measured")
    parser.add_argument("--rate", type=float, default=1000.0, help="mouse moves per second")
    parser.add_argument("--events", type=int, default=2000, help="events timed in the callback")
    parser.add_argument("--after", type=float, default=600.0, help="idle.after for the loop")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.after)
        return

    from display import virtual_display

    with virtual_display() as env:
        kid = Child(env, args.after)
        try:
            print(f"backends: {kid.backends}")

            # 1. Callback time per event.
            assert kid.ask("time-on") == "ok"
            mover = moves(env, args.events, args.rate)
            mover.wait()
            deadline = time.monotonic() + 5
            while int(kid.ask("count")) < args.events * 0.95 and time.monotonic() < deadline:
                time.sleep(0.05)
            times = [int(x) / 1000 for x in kid.ask("time-off").split()]
            if times:
                q = statistics.quantiles(times, n=100)
                print(
                    f"hook callback: {len(times)} events, median {statistics.median(times):.2f} us,"
                    f" p99 {q[98]:.2f} us, max {max(times):.1f} us"
                )

            # 2. Quiet.
            time.sleep(1.0)  # let the last events drain
            quiet = measure_cpu(kid, args.seconds)
            print(f"quiet: {quiet:.3f} % of a core over {args.seconds:.0f} s")

            # 3. Storm.
            n0 = int(kid.ask("count"))
            total = int(args.rate * args.storm_seconds)
            c0, t0 = kid.cpu(), time.monotonic()
            mover = moves(env, total, args.rate)
            mover.wait()
            wall = time.monotonic() - t0
            storm = 100.0 * (kid.cpu() - c0) / wall
            seen = int(kid.ask("count")) - n0
            print(
                f"storm: {seen} events in {wall:.1f} s ({seen / wall:.0f}/s): "
                f"{storm:.2f} % of a core; {1e6 * (kid.cpu() - c0) / max(seen, 1):.1f} us CPU/event"
                f" all in (pynput + Xlib + callback)"
            )
        finally:
            kid.close()


if __name__ == "__main__":
    main()
