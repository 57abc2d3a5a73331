"""The freeze as a curve: Runs of 100, 1,000 and 5,000 processes, the sweep
path and the cgroup path, at a desktop's soft limit of 1,024 open files.

For each size a Run of that many `sleep`s in sessions of 100 (a parallel
build's shape; tests/agents/big_tree.py) is started as Owl starts a Run, and
frozen and thawed `--trials` times, swept before each trial as the daemon's
watch sweeps every second. Printed per size and path, median and max:

- "freeze, all seen stopped": from the freeze's call to the moment every
  process of the Run is seen stopped ('T' in /proc, read here, apart from
  the module under test; each process is read again only until it is seen
  stopped, so the last read is of the last to stop);
- "cgroup frozen" (cgroup path): from the call to the moment the Run's
  cgroup was frozen, from when none of its processes runs its own code
  again (each then acts on its SIGSTOP on its way back to user space);
- "the kernel's own signals": os.kill(SIGSTOP) to every pid in a loop, no
  check of any kind, then SIGCONT to each: the floor any freeze of this
  many processes pays.

Then the person's share while a big Run is live: `python3 -c pass` started
at nice 0, median of `--starts`, on a quiet machine and beside a tree of
`--busy` processes at runs.nice that keeps forking (a bomb capped by its
shape), as a ratio. Targets: 1,000 processes stopped within 50 ms median on
the sweep path, 5,000 within 250 ms, the cgroup path within 20 ms at any
size; the person's start within 2x of a quiet machine's.

    python bench/freeze_sizes.py [--sizes 100,1000,5000] [--trials 20]
                                 [--nofile 1024] [--paths sweep,cgroup]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

BIG = str(Path(__file__).resolve().parent.parent / "tests" / "agents" / "big_tree.py")


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--nofile", type=int, default=1024, help="the soft open-file limit")
    ap.add_argument("--paths", default="sweep,cgroup")
    ap.add_argument("--busy", type=int, default=7, help="the bomb's depth (3 wide): 7 = 3,280")
    ap.add_argument("--starts", type=int, default=30)
    ap.add_argument("--nice", type=int, default=10)
    return ap.parse_args()


ARGS = _args() if __name__ == "__main__" else None
if ARGS is not None:  # before Owl is imported, as a desktop session starts the daemon
    _soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (ARGS.nofile, _hard))

from owl import tree  # noqa: E402

from figures import state  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "agents"))
from proclinks import under  # noqa: E402


def until_all_stopped(pids: list[int], t0: float, timeout: float = 10.0) -> float:
    """Seconds from t0 until every pid (gone ones aside) is seen stopped."""
    left = pids
    while left:
        left = [p for p in left if state(p) not in ("T", "t", "X", "Z")]
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"{len(left)} processes not stopped after {timeout} s")
    return time.perf_counter() - t0


def kernel_signals(pids: list[int]) -> float:
    t0 = time.perf_counter()
    for p in pids:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    took = time.perf_counter() - t0
    for p in pids:
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass
    return took


def heartbeat_of(tag: str) -> str:
    """Where the tree tagged `tag` writes its heartbeat (removed with it)."""
    return os.path.join(tempfile.gettempdir(), f"owl-bench-{tag}")


def start_tree(shape: list[str], cgroup: tree.RunGroup | None, nice: int) -> tuple[object, str]:
    tag = uuid.uuid4().hex
    heartbeat = heartbeat_of(tag)
    popen = tree.spawn(
        [sys.executable, "-S", BIG, heartbeat, *shape],
        cwd="/",
        env=dict(os.environ, OWL_RUN_ID=tag),
        stdout=subprocess.PIPE,
        stderr=None,
        nice=nice,
        cgroup=cgroup,
    )
    assert popen.stdout is not None
    popen.stdout.readline()  # "ready N"
    return popen, tag


def stop_tree(popen: object, tag: str, cgroup: tree.RunGroup | None) -> None:
    with tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid, cgroup=cgroup) as run:  # type: ignore[attr-defined]
        run.kill()
    popen.wait(10)  # type: ignore[attr-defined]
    tree.reap_orphans(lambda pid: False)
    with contextlib.suppress(OSError):
        os.unlink(heartbeat_of(tag))


def line(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"    {name:<28} median {statistics.median(ms):8.2f} ms   max {max(ms):8.2f} ms"


def curve(size: int, path: str, trials: int, nice: int) -> None:
    group = tree.RunGroup.make(f"bench-{uuid.uuid4().hex[:8]}", "1") if path == "cgroup" else None
    if path == "cgroup" and group is None:
        print(f"  {size:>5} processes, cgroup path: no delegated cgroup v2 here")
        return
    sessions = max(1, size // 100)
    popen, tag = start_tree(["sessions", str(sessions), str(size // sessions)], group, nice)
    try:
        pids = under(popen.pid)  # type: ignore[attr-defined]
        run = tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid, cgroup=group, nice=nice)  # type: ignore[attr-defined]
        stopped, held, signals = [], [], []
        for _ in range(trials):
            run.identities()  # the daemon's watch, every second, and after it
            run.prepare()
            time.sleep(0.05)
            m0, t0 = time.monotonic(), time.perf_counter()
            run.freeze()
            stopped.append(until_all_stopped(pids, t0))
            if run.held_at is not None:
                held.append(run.held_at - m0)
            run.thaw()
            time.sleep(0.05)
            signals.append(kernel_signals(pids))
        run.close()
        print(f"  {len(pids):>5} processes, {path} path ({trials} trials):")
        print(line("freeze, all seen stopped", stopped))
        if held:
            print(line("cgroup frozen", held))
        print(line("the kernel's own signals", signals))
    finally:
        stop_tree(popen, tag, group)


def person_start(starts: int) -> float:
    took = []
    for _ in range(starts):
        t0 = time.perf_counter()
        subprocess.run(["python3", "-c", "pass"], check=True)
        took.append(time.perf_counter() - t0)
        time.sleep(0.02)
    return statistics.median(took)


def share(depth: int, starts: int, nice: int) -> None:
    quiet = person_start(starts)
    popen, tag = start_tree(["bomb", "3", str(depth)], None, nice)
    try:
        run = tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid, nice=nice)  # type: ignore[attr-defined]
        n = len(run.sweep())  # weighs each of its sessions at runs.nice, as the daemon's watch does
        busy = person_start(starts)
        run.close()
    finally:
        stop_tree(popen, tag, None)
    print(
        f"  python3 -c pass, median of {starts}: quiet {quiet * 1000:.1f} ms, beside a live "
        f"Run of {n} processes forking at nice {nice} {busy * 1000:.1f} ms: "
        f"{busy / quiet:.2f}x (target <= 2x)"
    )


def main(args: argparse.Namespace) -> int:
    tree.become_subreaper()
    print(
        f"open-file limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, backend "
        f"{tree.BACKEND}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        for path in args.paths.split(","):
            curve(size, path, args.trials, args.nice)
    share(args.busy, args.starts, args.nice)
    return 0


if __name__ == "__main__":
    assert ARGS is not None
    sys.exit(main(ARGS))
