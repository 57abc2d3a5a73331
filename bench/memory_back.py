"""The person's first touches of their app's memory when they come back to a
frozen Run, with and without the Run's memory given back at the freeze.

A "machine" of --machine MB made as a memory cgroup (v1 here, as root; v2
where its memory controller is on), holding two: the person's app, which
touched a working set of --app MB and then sat idle while they were away, and
a Run that then took --run MB (so the app's cold pages went to swap). The
person returns: the Run is stopped (SIGSTOP, as a freeze) and the app touches
every page of its working set once; the figure is how long that takes.
Three ways, in turns, --trials of each:

- without: nothing else is done (the kernel makes room for the app's pages by
  writing out the Run's, at the app's touch);
- with, at once: `owl.tree.cgroup.give_back` on the Run's cgroup starts at the
  freeze, on a thread, while the app touches (what the daemon does);
- with, done: the same, finished before the app's first touch (a person who
  comes back and reads their mail for a few seconds first).

Needs root, swap (`swapon --show`) and a memory cgroup we may make groups
under. Prints medians and the ratio without / with.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))

from owl.tree.cgroup import give_back  # noqa: E402

# A process that maps MB of anonymous memory and touches it on command:
# "alloc" touches every page (a write), "touch" reads one byte of every page
# and answers with the seconds it took.
HOLDER = r"""
import mmap, sys, time
size = int(sys.argv[1]) << 20
m = mmap.mmap(-1, size)
page = mmap.PAGESIZE
for line in sys.stdin:
    t0 = time.perf_counter()
    if line.startswith("alloc"):
        for i in range(0, size, page):
            m[i] = 1
    else:
        s = 0
        for i in range(0, size, page):
            s += m[i]
    print(time.perf_counter() - t0, flush=True)
"""


def own_memory_cgroup() -> Path:
    """Our own memory cgroup directory: v1's memory hierarchy, else cgroup v2's."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return Path("/sys/fs/cgroup") / line[3:].lstrip("/")
    raise SystemExit("no memory cgroup found")


class Machine:
    """A memory cgroup of `mb` with an `app` and a `run` group inside."""

    def __init__(self, mb: int) -> None:
        base = own_memory_cgroup()
        self.path = base / f"owl-bench-machine-{os.getpid()}"
        self.path.mkdir()
        self.v1 = (self.path / "memory.limit_in_bytes").exists()
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(mb << 20))
        else:
            (self.path / "memory.max").write_text(str(mb << 20))
            (self.path / "cgroup.subtree_control").write_text("+memory")
        for name in ("app", "run"):
            (self.path / name).mkdir()

    def spawn(self, name: str, mb: int) -> subprocess.Popen[str]:
        procs = self.path / name / ("tasks" if self.v1 else "cgroup.procs")
        p = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: procs.write_text(str(os.getpid())),
        )
        return p

    def remove(self) -> None:
        for name in ("app", "run", ""):
            try:
                (self.path / name).rmdir()
            except OSError:
                pass


def ask(p: subprocess.Popen[str], what: str) -> float:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(what + "\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def trial(a: argparse.Namespace, how: str) -> float:
    m = Machine(a.machine)
    app = run = None
    try:
        app = m.spawn("app", a.app)
        ask(app, "alloc")
        run = m.spawn("run", a.run)
        ask(run, "alloc")  # the app's idle pages go to swap to make room
        run.send_signal(signal.SIGSTOP)  # the person is back: the Run frozen
        if how == "done":
            give_back(m.path / "run")
        elif how == "at once":
            threading.Thread(target=give_back, args=(m.path / "run",), daemon=True).start()
        return ask(app, "touch")
    finally:
        for p in (app, run):
            if p is not None:
                p.kill()
                p.wait()
        deadline = time.monotonic() + 10
        while (m.path / "run").exists() and time.monotonic() < deadline:
            m.remove()
            time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", type=int, default=1024, help="the machine's memory, MB")
    ap.add_argument("--app", type=int, default=400, help="the app's working set, MB")
    ap.add_argument("--run", type=int, default=800, help="what the Run takes, MB")
    ap.add_argument("--trials", type=int, default=5)
    a = ap.parse_args()
    swap = Path("/proc/swaps").read_text().strip().splitlines()[1:]
    if not swap:
        raise SystemExit("no swap here: nothing can be given back (swapon a file first)")
    took: dict[str, list[float]] = {"without": [], "at once": [], "done": []}
    for _ in range(a.trials):
        for how in took:
            took[how].append(trial(a, how))
    med = {how: statistics.median(v) for how, v in took.items()}
    print(
        f"machine {a.machine} MB, app {a.app} MB, Run {a.run} MB, {a.trials} trials each, "
        f"swap: {', '.join(s.split()[0] for s in swap)}"
    )
    for how, v in took.items():
        print(
            f"  {how:<8} the app's first touches: median {med[how] * 1000:8.1f} ms  "
            f"(min {min(v) * 1000:.1f}, max {max(v) * 1000:.1f})"
        )
    print(
        f"ratio without / with: {med['without'] / med['at once']:.2f} given back at once, "
        f"{med['without'] / med['done']:.2f} given back before the first touch"
    )


if __name__ == "__main__":
    main()
