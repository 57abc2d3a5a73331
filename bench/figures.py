"""What the freeze benches share: a process's state read straight from the
kernel, a spin until a condition holds, the 100-process tree they freeze, and
the way a figure is printed (median, p99, max).

The state is read with one open/read of /proc/<pid>/stat, not through psutil:
the benches spin on it while the processes stop, and every microsecond the
reading takes is in the figure (psutil where there is no /proc: macOS).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import psutil

AGENT = str(Path(__file__).resolve().parent.parent / "tests" / "agents" / "tree_agent.py")


def state(pid: int) -> str:
    """One process's state letter ('T' stopped, 'X' gone)."""
    if sys.platform.startswith("linux"):
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 2048)
            finally:
                os.close(fd)
        except OSError:
            return "X"
        return chr(data[data.rfind(b")") + 2])
    try:
        return "T" if psutil.Process(pid).status() == psutil.STATUS_STOPPED else "S"
    except psutil.Error:
        return "X"


def spin_until(
    cond: Callable[[], bool], timeout: float = 5.0, what: str = "a process to change state"
) -> float:
    """Spin (no sleep: the figure is the point) until cond(); perf_counter when it held."""
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
    return time.perf_counter()


def pct(values: list[float], q: float) -> float:
    """The q-th quantile of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(name: str, values: list[float], width: int = 34) -> None:
    """One figure's line: median, p99 and max of `values` (seconds) in ms."""
    ms = [v * 1000 for v in values]
    print(
        f"  {name:<{width}} median {statistics.median(ms):7.2f} ms   "
        f"p99 {pct(ms, 0.99):7.2f} ms   max {max(ms):7.2f} ms"
    )


def fanout_argv(ready: Path | str, sessions: int, per: int) -> list[str]:
    """The tree agent's command for `sessions` sessions of `per` processes, each
    announcing itself as a file `<...>-<pid>` in `ready`."""
    return [sys.executable, AGENT, "--ready", str(ready), "--fanout", str(sessions), str(per)]


def ready_pids(ready: Path | str, total: int, timeout: float = 60.0) -> list[int]:
    """Wait (sleeping: this is set-up, not a figure) until `total` processes
    announced themselves in `ready`; their pids."""
    deadline = time.monotonic() + timeout

    def names() -> list[str]:
        return [n for n in os.listdir(ready) if not n.endswith(".tmp")]

    while len(names()) < total:
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for the tree's {total} processes")
        time.sleep(0.01)
    return [int(n.rpartition("-")[2]) for n in names()]


@contextlib.contextmanager
def spawned_tree(
    argv: list[str], tag: str, cwd: str, env: dict[str, str], nice: int = 10
) -> Iterator[int]:
    """Start `argv` as a Run would be (Owl's own spawn, at `nice`), tagged `tag`;
    yield its pid and, whatever happens, kill its whole tree at the end."""
    from owl import tree

    popen = tree.spawn(
        argv, cwd=cwd, env=dict(env, OWL_RUN_ID=tag), stdout=None, stderr=None, nice=nice
    )
    try:
        yield popen.pid
    finally:
        with tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid) as run:
            run.kill()
        popen.wait(10)
        tree.reap_orphans(lambda pid: False)


@contextlib.contextmanager
def sweep_bench(description: str) -> Iterator[tuple[argparse.Namespace, str, int]]:
    """What the sweep benches share: `--trials`, `--sessions` and `--per` read
    from the command line, the tree of `sessions` x `per` processes started and
    waited for, the machine described in one line; yield (args, the tree's tag,
    its pid), the tree killed whole at the end."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--per", type=int, default=10)
    args = ap.parse_args()
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    total = args.sessions * args.per
    with tempfile.TemporaryDirectory() as ready:
        argv = fanout_argv(ready, args.sessions, args.per)
        with spawned_tree(argv, tag, ready, dict(os.environ)) as top:
            ready_pids(ready, total)
            print(
                f"tree: {total} processes in {args.sessions} sessions, "
                f"{len(psutil.pids())} processes on the machine, {os.cpu_count()} cores, "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            yield args, tag, top
