"""From an input to the last process of a 100-process Run stopped, per compositor, beside X11.

For each desktop the real `owl daemon` reads the machine for itself, with one
Run: the tree agent's 100 processes in 10 sessions. Each trial sends one input
and polls /proc/<pid>/stat of the pids not yet seen stopped (nothing else: a
poll of its own costs the figure its reads) until every one is stopped, then keeps quiet until the daemon thaws the Run (quiet >= idle.after) and goes
again. How the input is sent, and so where t0 is:

  x11     an XTEST motion from this process (Xvfb; pynput's hooks)
  mutter  NotifyPointerMotionRelative on a RemoteDesktop session, from this
          process (Mutter's user-active watch)
  kwin    org_kde_kwin_fake_input pointer_motion, written to the input helper
          (ext_idle_notify_v1)
  sway    `seat - cursor move` on sway's IPC socket from this process, what
          swaymsg sends (org_kde_kwin_idle)

With --load N a second phase runs the same trials under N busy loops at
nice 10 (what an agent compiling or running tests puts on the cores at the
moment the person comes back), printed beside the quiet phase. They are
started as Owl starts a Run's processes, each in a session of its own that
the daemon lowers as a whole (--load-as run); --load-as plain starts them in
this bench's session with `nice` alone, as a tool outside Owl would; the daemon's
log says for each freeze how long after its hook heard the input the freeze
was done, and how much of that the input waited for the engine thread, so a
slow trial shows whether the time went before the daemon heard the input
(the X server, the compositor), in the hop, or in the freeze.

Target: p99 <= 20 ms and median <= 5 ms, loaded or not. Then, under mutter, the daemon's CPU while nothing
happens (nothing queued; a Job waiting while the machine is in use), measured
as bench/quiet_cpu.py measures it on every desktop, target <= 0.02 % of one core.

    python bench/wayland_freeze.py [--trials 50] [--only mutter,kwin,sway,x11] [--quiet 60]
                                   [--load 3] [--runs 3] [--sandbox off,required]

With --sandbox off,required each desktop runs twice, the Run uncontained and
then contained by bubblewrap (its own PID namespace and network: the figure
then counts every process the daemon freezes, the sandbox's own among them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from compositors import compositor, missing  # noqa: E402
from display import virtual_display  # noqa: E402
from figures import pct, report, state  # noqa: E402
from owl import tree  # noqa: E402
from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402
from quiet_cpu import TARGET as CPU_TARGET, measure_desktop  # noqa: E402

TREE_AGENT = str(ROOT / "tests" / "agents" / "tree_agent.py")
TARGET_MS = 20.0
MEDIAN_TARGET_MS = 5.0
KINDS = ("x11", "mutter", "kwin", "sway")


def poll_until(cond: Callable[[], bool], timeout: float, pause: float = 0.0005) -> float:
    """perf_counter when cond() first held, checking every `pause` s.

    Not a pure spin: on two busy cores a spinning bench would take the CPU the
    daemon needs to do the very thing being timed."""
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            raise SystemExit("timed out: the Run's processes did not change state")
        time.sleep(pause)
    return time.perf_counter()


def daemon(env: dict, tmp: Path, after: str) -> tuple[OwlDaemon, Path]:
    """The real daemon, reading the machine itself, with the tree agent as its agent,
    its Run contained or not as SANDBOX says."""
    ready = tmp / "ready"
    ready.mkdir()
    argv = [sys.executable, TREE_AGENT, "--ready", str(ready), "--fanout", "10", "10"]
    command = ["sh", "-c", "exec " + shlex.join(argv), "tree-agent", "{prompt}"]
    cfg = {
        "idle": {"after": after, "require_ac_power": False},
        "interruption": {"grace_window": "1h"},
        "runs": {"stall": "1h"},
        "agents": {"tree": {"command": command}},
        "agent": {"default": "tree"},
        # contained, the tree agent's folder of pids is the one it may write
        "sandbox": {"mode": SANDBOX, "write": [str(ready)]},
    }
    d = OwlDaemon(tmp / "home", cfg, manual=False, env=dict(env), agent=False)
    d.env.pop("OWL_MACHINE", None)
    if env.get("XDG_SESSION_TYPE") == "wayland":
        d.env.pop("DISPLAY", None)
    return d, ready


def trials(
    d: OwlDaemon, ready: Path, project: Path, send: Callable[[int], None], n: int, load: int
) -> dict[str, Phase]:
    """The trials of one daemon: quiet, then (with `load`) under that many busy loops."""
    d.add("build a tree", project)
    wait_for(
        lambda: len([x for x in os.listdir(ready) if not x.endswith(".tmp")]) >= 100,
        timeout=60,
        what="100 processes of the Run",
    )
    pids = [int(x.rpartition("-")[2]) for x in os.listdir(ready)]
    if SANDBOX != "off":
        # Inside its own PID namespace the agent knows its processes by pids
        # of that namespace: take the daemon's list (the host's pids, the
        # sandbox's own processes among them, all of which a freeze stops).
        def listed() -> list[int]:
            runs = d.status()["runs"]
            return runs[0]["pids"] if runs and len(runs[0]["pids"]) >= 100 else []

        pids = wait_for(listed, timeout=30, what="the daemon to list the contained Run")
        if not d.status()["runs"][0]["contained"].startswith("contained"):
            raise SystemExit(f"the Run is not contained: {d.status()['runs'][0]['contained']}")
    phases = {"quiet": phase(d, pids, send, n)}
    if load:
        with busy_loops(load):
            phases[f"load {load}"] = phase(d, pids, send, n)
    if d.proc.poll() is not None:
        raise SystemExit("the daemon died during the benchmark")
    return phases


class Phase:
    """One phase's figures: input -> all stopped (as this process saw it), the
    daemon's own share (hook heard it -> its freeze done, from its log), and
    stopped -> all running again."""

    def __init__(self, detectors: list[str]) -> None:
        self.detectors = detectors
        self.freeze: list[float] = []
        self.heard: list[float] = []  # sent -> the daemon's hook heard it
        self.first: list[float] = []  # -> the hearing thread stopped the known processes
        self.queued: list[float] = []  # -> the engine thread took it
        self.signalled: list[float] = []  # -> the known processes signalled
        self.daemon: list[float] = []  # heard -> the freeze done
        self.thaw: list[float] = []


FROZEN_LINE = re.compile(
    r"frozen by \w+: input heard at ([\d.]+), stopped first \+([\d.-]+) ms, "
    r"taken \+([\d.]+) ms, signalled \+([\d.]+) ms, frozen \+([\d.]+) ms"
)


def phase(d: OwlDaemon, pids: list[int], send: Callable[[int], None], n: int) -> Phase:
    running = lambda: all(state(p) not in "TX" for p in pids)  # noqa: E731
    stopped = lambda: until_all(pids, lambda p: state(p) == "T")  # noqa: E731
    out = Phase(d.status()["machine"]["detectors"])
    poll_until(running, 30)
    seen = d.log.stat().st_size
    sent: list[float] = []
    for i in range(n):
        time.sleep(0.05)
        t0 = time.perf_counter()  # CLOCK_MONOTONIC, as the daemon's time.monotonic()
        send(i)
        sent.append(t0)
        # Nothing else is read meanwhile: a second poll (of pending signals,
        # say) costs this process a read of every pid first and puts that
        # time into the figure. The daemon's log says when the stops were sent.
        t_all = poll_until(stopped(), 10)
        out.freeze.append(t_all - t0)
        out.thaw.append(poll_until(running, 30, pause=0.005) - t_all)
    with open(d.log, "rb") as f:
        f.seek(seen)
        lines = FROZEN_LINE.findall(f.read().decode(errors="replace"))
    for heard_at, first, taken, signalled, frozen in lines:
        t0 = max((t for t in sent if t <= float(heard_at)), default=None)
        if t0 is not None:
            out.heard.append(float(heard_at) - t0)
        if first != "-":
            out.first.append(float(first) / 1000)
        out.queued.append(float(taken) / 1000)
        out.signalled.append(float(signalled) / 1000)
        out.daemon.append(float(frozen) / 1000)
    return out


def until_all(pids: list[int], reached: Callable[[int], bool]) -> Callable[[], bool]:
    """A condition that holds once every pid has reached a state it keeps until the thaw.

    Each check reads only the pids not seen there yet, so the check that
    succeeds reads one file, not 100: reading all 100 /proc files takes about a
    millisecond in Python, and a full re-read would put that millisecond, and
    the CPU it takes from the processes still stopping, into every figure."""
    left = list(pids)

    def check() -> bool:
        while left and reached(left[-1]):
            left.pop()
        return not left

    return check


# Where the busy loops run: "run" starts each as Owl starts a Run's process
# (tree.spawn at runs.nice, its session lowered as the daemon's sweep lowers
# every session of a Run), "plain" in this bench's own session with `nice`
# alone, which on a kernel with autogroups weighs no less than the desktop.
LOAD_AS = "run"
# The Run's sandbox.mode: "off", or "required" (contained by bubblewrap).
SANDBOX = "off"


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """`n` busy loops at nice 10, what an agent compiling or running tests puts on the cores."""
    loop = ["sh", "-c", "while :; do :; done"]
    if LOAD_AS == "run":
        procs = [
            tree.spawn(
                loop,
                cwd="/",
                env=dict(os.environ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                nice=10,
            )
            for _ in range(n)
        ]
        for p in procs:
            tree.ProcessTree(None, p.pid, nice=10).close()
    else:
        procs = [subprocess.Popen(["nice", "-n", "10", *loop]) for _ in range(n)]
    try:
        time.sleep(0.5)  # let the scheduler see them before the first trial
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def run_x11(tmp: Path, project: Path, n: int, after: str, load: int) -> dict[str, Phase]:
    from Xlib import X, display as xdisplay
    from Xlib.ext import xtest

    with virtual_display(dbus=False) as xenv:
        conn = xdisplay.Display(xenv.display)

        def send(i: int) -> None:
            xtest.fake_input(conn, X.MotionNotify, x=400 + (i % 2) * 100, y=300)
            conn.sync()

        d, ready = daemon(xenv, tmp, after)
        with d:
            out = trials(d, ready, project, send, n, load)
        conn.close()
        return out


def run_wayland(
    kind: str, tmp: Path, project: Path, n: int, after: str, load: int
) -> dict[str, Phase]:
    with compositor(kind) as c:
        d, ready = daemon(c.env, tmp, after)
        with d:
            # sway: the command swaymsg would send, sent from here (see compositors.py).
            send = getattr(c, "ipc_move", None) or (lambda i: c.move())
            return trials(d, ready, project, send, n, load)


def show(ph: Phase) -> None:
    report("freeze: every process stopped", ph.freeze)
    print("    slowest: " + ", ".join(f"{v * 1000:.1f}" for v in sorted(ph.freeze)[-5:]) + " ms")
    if ph.daemon:
        report("  input sent -> the daemon heard it", ph.heard)
        if ph.first:
            report("  heard -> stopped by the hearing thread", ph.first)
        report("  heard -> the engine took it", ph.queued)
        report("  heard -> known processes signalled", ph.signalled)
        report("  heard -> freeze done", ph.daemon)
    report("then quiet -> all running again", ph.thaw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--after", default="500ms", help="idle.after (the thaw wait between trials)")
    ap.add_argument("--only", default=",".join(KINDS), help="desktops, comma-separated")
    ap.add_argument(
        "--load", type=int, default=0, help="busy loops at nice 10 for a second phase (0: none)"
    )
    ap.add_argument(
        "--load-as",
        choices=("run", "plain"),
        default="run",
        help="busy loops started as a Run's processes are (default), or plainly in this session",
    )
    ap.add_argument("--runs", type=int, default=1, help="how many times to run it all")
    ap.add_argument(
        "--sandbox",
        default="off",
        help="the Run's sandbox.mode, or several comma-separated (off,required: both, side by side)",
    )
    ap.add_argument(
        "--quiet",
        type=float,
        default=60.0,
        help="seconds of quiet per CPU phase under mutter (0: skip)",
    )
    args = ap.parse_args()
    global LOAD_AS, SANDBOX
    LOAD_AS = args.load_as
    # Stopped with a signal, it still ends what it started (the busy loops, the
    # compositors, the daemons): their `finally` blocks run on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    kinds = [k for k in args.only.split(",") if k]
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"{args.trials} trials each; idle.after {args.after}; busy loops {args.load}"
        + (f" ({args.load_as})" if args.load else "")
    )
    table: list[tuple[int, str, str, Phase]] = []
    modes = [m for m in args.sandbox.split(",") if m]
    for run_no in range(1, args.runs + 1):
        for kind in kinds:
            if kind != "x11" and missing(kind):
                print(f"{kind}: not installed: {', '.join(missing(kind))}")
                continue
            for mode in modes:
                SANDBOX = mode
                with tempfile.TemporaryDirectory() as tmp:
                    tmpdir = Path(tmp)
                    project = make_project(tmpdir / "project")
                    run = run_x11 if kind == "x11" else (lambda *a, k=kind: run_wayland(k, *a))
                    phases = run(tmpdir, project, args.trials, args.after, args.load)
                label = (
                    kind
                    if modes == ["off"]
                    else f"{kind}/{'contained' if mode != 'off' else 'plain'}"
                )
                for name, ph in phases.items():
                    table.append((run_no, label, name, ph))
                    print(
                        f"run {run_no}, {label} ({', '.join(ph.detectors)}), {name}: "
                        "input -> all of the Run stopped"
                    )
                    show(ph)
    print(f"target p99 <= {TARGET_MS:.0f} ms, median <= {MEDIAN_TARGET_MS:.0f} ms:")
    for run_no, kind, name, ph in table:
        p99, med = pct(ph.freeze, 0.99) * 1000, statistics.median(ph.freeze) * 1000
        met = p99 <= TARGET_MS and med <= MEDIAN_TARGET_MS
        own = f"daemon p99 {pct(ph.daemon, 0.99) * 1000:5.1f} ms" if ph.daemon else "daemon -"
        print(
            f"  run {run_no} {kind:<17} {name:<7} median {med:5.1f} ms  p99 {p99:6.1f} ms  "
            f"({own})  {'met' if met else 'NOT met'}"
        )
    if args.quiet > 0 and "mutter" in kinds and not missing("mutter"):
        with tempfile.TemporaryDirectory() as tmp:
            rows = measure_desktop("mutter", Path(tmp), args.quiet)
        print(
            f"daemon CPU under mutter, % of one core, {args.quiet:.0f} s each "
            f"(target <= {CPU_TARGET} %):"
        )
        for name, ticks, fine in rows:
            worst = fine  # schedstat: see quiet_cpu.py
            print(
                f"  {name:<24} {ticks:6.3f} % (schedstat {fine:6.3f} %)  "
                f"{'ok' if worst <= CPU_TARGET else 'OVER TARGET'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
