"""Start cost and freeze latency of a contained Run's command beside an uncontained one.

    .venv/bin/python bench/sandbox.py [-n 30] [--trials 100]

Start cost: the median wall time to start and finish `/bin/true` plainly,
inside bwrap with the policy a Run gets (no network), and inside bwrap with
its own network (pasta attached), in turns; a contained Run's start adds the
making of its command (`contain.wrap`: the policy, the agent's own files read,
on the engine's thread), timed apart, and the same without the seccomp filter
(what loading it adds; building it, once at the daemon's start, is timed
apart too). Target: a contained Run's start within
+150 ms of an uncontained one's, median (the line "contained Run start" says
whether it is met). bwrap makes its mounts while pasta starts (it waits only once they are
made), so what pasta adds is its own start (IPv4 only: about 28 ms) and the
network helper's (about 17 ms), both stretched by a busy machine.

Freeze latency: the same 100-process tree (10 sessions of 10, the freeze
bench's agent and trial, see bench/freeze.py) plainly and contained with its
own network, frozen and thawed side by side; every process of the tree is
counted, the sandbox's own (bwrap, pasta) too. Target: unchanged within noise.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))

from figures import fanout_argv, pct, ready_pids, spawned_tree  # noqa: E402
from freeze import KEYS, trial  # noqa: E402  the freeze bench's own

from owl import tree  # noqa: E402
from owl.sandbox import contain, policy, syscalls  # noqa: E402

SESSIONS, PER = 10, 10


def medians_ms(rows: list[Callable[[], tuple[list[str], dict[str, str]]]], n: int) -> list[float]:
    """The median wall time of each command (with its environment), run in
    turns (``n`` rounds, each in a shuffled order), so that a machine's load
    changing meanwhile weighs on every row alike. Each command is made afresh
    before its run (untimed), as each Run's is: what it names of the host
    (a socket hidden) is of that moment."""
    times: list[list[float]] = [[] for _ in rows]
    for _ in range(n):
        for i in random.sample(range(len(rows)), len(rows)):
            argv, env = rows[i]()
            t = time.perf_counter()
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
            times[i].append((time.perf_counter() - t) * 1000)
    return [statistics.median(v) for v in times]


def wrapped(command: list[str], settings: policy.Settings, wt: Path, env: dict[str, str]):
    return contain.wrap(
        command,
        settings=settings,
        agent="claude",
        env=env,
        worktree=str(wt),
        project=str(wt),
        owl_dirs=[],
    )


TARGET_MS = 150.0  # a contained Run's start over an uncontained one's, median


def unfiltered(argv: list[str]) -> list[str]:
    """A contained command without its seccomp filter (netns.py's ``--filter HEX``)."""
    if "--filter" not in argv:
        return argv
    at = argv.index("--filter")
    return argv[:at] + argv[at + 2 :]


def start_cost(n: int, wt: Path, env: dict[str, str]) -> None:
    rows: list[tuple[str, Callable[[], tuple[list[str], dict[str, str]]]]] = [
        ("plain", lambda: (["/bin/true"], env))
    ]
    made: list[float] = []
    for label, s in (
        ("bwrap, no network", policy.Settings(network=False)),
        ("bwrap, own network (pasta)", policy.Settings()),
    ):
        for _ in range(n):  # the argv itself: made on the engine's thread
            t = time.perf_counter()
            w = wrapped(["/bin/true"], s, wt, env)
            made.append((time.perf_counter() - t) * 1000)

        def make(s: policy.Settings = s) -> tuple[list[str], dict[str, str]]:
            w = wrapped(["/bin/true"], s, wt, env)
            return w.argv, w.env

        rows.append((f"{label} [{w.label}]", make))
        if not s.network:  # the same without the seccomp filter: what the filter adds

            def bare(s: policy.Settings = s) -> tuple[list[str], dict[str, str]]:
                w = wrapped(["/bin/true"], s, wt, env)
                return unfiltered(w.argv), w.env

            rows.append((f"{label}, no seccomp filter", bare))
    print(f"start cost ({n} runs each, in turns, load average {os.getloadavg()[0]:.1f}):")
    figures = medians_ms([m for _, m in rows], n)
    for (label, _), ms in zip(rows, figures):
        print(f"  {label:70s} median {ms:6.1f} ms  (+{ms - figures[0]:.1f} ms)")
    making = statistics.median(made)
    print(f"  {'making the contained command (contain.wrap)':70s} median {making:6.1f} ms")
    build = []
    for _ in range(n):
        t = time.perf_counter()
        syscalls.bpf.__wrapped__()  # uncached: what the daemon's start pays once
        build.append((time.perf_counter() - t) * 1000)
    built = statistics.median(build)
    print(
        f"  {'building the seccomp filter (once, at the daemon start)':70s} median {built:6.2f} ms"
    )
    over = figures[-1] + making - figures[0]
    print(
        f"contained Run start (own network, its command made): +{over:.1f} ms over "
        f"uncontained, median (target <= +{TARGET_MS:.0f} ms): "
        + ("met" if over <= TARGET_MS else "MISSED")
    )


def freeze_figures(contained: bool, trials: int, wt: Path) -> dict[str, list[float]]:
    """Freeze and thaw a 100-process tree ``trials`` times; the freeze bench's figures."""
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    ready = wt / ("ready-contained" if contained else "ready-plain")
    ready.mkdir()
    env = dict(os.environ, OWL_RUN_ID=tag, HOME=str(wt.parent / "home"))
    argv = fanout_argv(ready, SESSIONS, PER)
    if contained:
        w = wrapped(argv, policy.Settings(), wt, env)
        assert w.contained, w.label
        argv, env = w.argv, w.env
    out: dict[str, list[float]] = {k: [] for k in KEYS}
    with (
        spawned_tree(argv, tag, str(wt), env) as top,
        tree.ProcessTree(("OWL_RUN_ID", tag), top) as run,
    ):
        ready_pids(ready, SESSIONS * PER)
        pids = [p for p, _ in run.identities()]  # host pids, the sandbox's own among them
        print(f"  {'contained' if contained else 'plain'}: {len(pids)} processes")
        for _ in range(trials):
            run.identities()  # the daemon's watch does this every second
            trial(run, pids, out)
    return out


def side_by_side(plain: dict[str, list[float]], boxed: dict[str, list[float]]) -> None:
    print(f"  {'':30} {'plain median/p99':>22} {'contained median/p99':>24}  ratio of medians")
    for k in KEYS:
        a = [v * 1000 for v in plain[k]]
        b = [v * 1000 for v in boxed[k]]
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"  {k:30} {ma:8.2f} / {pct(a, 0.99):7.2f} ms   {mb:8.2f} / {pct(b, 0.99):7.2f} ms"
            f"   {mb / ma if ma else float('nan'):5.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="runs per start-cost figure")
    ap.add_argument("--trials", type=int, default=100, help="freezes per tree")
    ap.add_argument("--start-only", action="store_true", help="only the start cost")
    args = ap.parse_args()
    tree.become_subreaper()
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp, "wt")
        wt.mkdir()
        # a home of its own: the agent's state folders a Run's start makes are made there
        Path(tmp, "home").mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
        start_cost(args.n, wt, dict(env, HOME=str(Path(tmp, "home"))))
        if args.start_only:
            return
        print(
            f"freeze latency ({args.trials} trials each, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f}):"
        )
        plain = freeze_figures(False, args.trials, wt)
        boxed = freeze_figures(True, args.trials, wt)
        side_by_side(plain, boxed)


if __name__ == "__main__":
    main()
