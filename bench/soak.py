"""Soak: the real daemon under a long, random day of work and interruptions.

    .venv/bin/python bench/soak.py --minutes 10 --jobs 500

Queues JOBS Jobs across a few projects, with agents (tests/agents/agent.py)
that finish, fail, trap SIGTERM and start setsid children, then plays a
person at the machine: bursts of input (which freeze the Runs; some bursts
outlast the 2 s grace window, so the Runs are ended and killed, and one such
burst is sure to fall while a Run works) and quiet spells (Runs start and thaw). Meanwhile it times `status` and samples the
daemon's memory, threads and open files. At the end it stops the daemon the
ordinary way and checks: no process of any Run is left, every Job is in a
final or pending state, every Run is closed, the database checks ok, and the
daemon's memory stayed flat. Prints the figures; exits 1 if a check fails.

tests/test_soak.py runs a one-minute version of the same thing.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from owlproc import SocketOwl, make_project  # noqa: E402

FINAL_OR_PENDING = {"pending", "review", "done", "cancelled", "exhausted", "blocked"}


def random_prompt(rng: random.Random) -> tuple[str, int | None]:
    """An agent script and its attempts: finishers, failers, TERM-trappers, forkers."""
    s = lambda lo, hi: f"{rng.uniform(lo, hi):.2f}"  # noqa: E731
    kind = rng.choices(
        ["finish", "fail", "trap", "setsid", "trap-setsid", "chatty"],
        weights=[30, 15, 15, 15, 10, 15],
    )[0]
    if kind == "finish":
        return f"sleep={s(0.05, 1.5)} exit=0", None
    if kind == "fail":
        return f"sleep={s(0.05, 1.0)} exit={rng.randint(1, 9)}", rng.randint(1, 2)
    if kind == "trap":
        return f"trap-term sleep={s(0.2, 2.5)} exit=0", None
    if kind == "setsid":
        return f"setsid-child={s(0.5, 30)} sleep={s(0.1, 1.5)} exit=0", None
    if kind == "trap-setsid":
        return f"trap-term setsid-child={s(1, 30)} sleep={s(0.2, 2.0)} exit=0", None
    return f"tick=0.05 sleep={s(0.2, 2.0)} exit=0", None


class Sampler:
    """The daemon's resident memory, threads and open files, over time."""

    def __init__(self, pid: int) -> None:
        self.p = psutil.Process(pid)
        self.rows: list[tuple[float, int, int, int]] = []

    def sample(self) -> None:
        try:
            with self.p.oneshot():
                self.rows.append(
                    (
                        time.monotonic(),
                        self.p.memory_info().rss,
                        self.p.num_threads(),
                        self.p.num_fds(),
                    )
                )
        except psutil.Error:
            pass


def soak(
    minutes: float, jobs: int, workdir: Path, seed: int = 1, say: Callable[[str], None] = print
) -> dict:
    """Run the soak; return its figures and the list of failed checks (empty: all good)."""
    rng = random.Random(seed)
    projects = [make_project(workdir / f"proj{i}") for i in range(4)]
    d = SocketOwl(
        workdir / "home",
        {
            "idle": {"after": "1s"},
            "interruption": {"grace_window": "2s"},
            "runs": {"max_parallel": 2, "stall": "1m", "timeout": "5m"},
        },
    )
    figures: dict[str, Any] = {}
    problems: list[str] = []
    status_times: list[float] = []
    slow: list[tuple[str, float]] = []  # (wall clock, seconds): to read the log by
    try:
        d.start()
        sampler = Sampler(d.proc.pid)
        sampler.sample()
        t0 = time.monotonic()
        added = []
        for _ in range(jobs):
            prompt, attempts = random_prompt(rng)
            args: dict[str, Any] = {"prompt": prompt, "project": str(rng.choice(projects))}
            if attempts:
                args["attempts"] = attempts
            added.append(d.ask("add", **args)["id"])
        figures["queue_s"] = round(time.monotonic() - t0, 1)
        say(f"queued {jobs} Jobs in {figures['queue_s']} s")

        end = time.monotonic() + minutes * 60
        bursts = quiet = long_bursts = 0
        warm_at = time.monotonic() + min(20.0, minutes * 60 / 4)
        rss_start: int | None = None
        last_report = time.monotonic()
        # The day's one sure interruption: a burst past the grace window begun
        # while a Run is working. Left to chance, a short day may have none (its
        # one long burst falling while every Run was starting or done), and then
        # it has not shown that a Run ended by the person's return leaves nothing.
        interruption_owed = True
        working = False  # whether the last status showed a Run working
        while time.monotonic() < end:
            if interruption_owed and working:
                d.machine("input")
                length = 4.0
                interruption_owed = False
                long_bursts += 1
                bursts += 1
            elif rng.random() < 0.35:
                d.machine("input")
                length = rng.choice([rng.uniform(0.1, 1.5), rng.uniform(2.5, 4.0)])
                long_bursts += length > 2.0
                bursts += 1
            else:
                d.machine("idle")
                length = rng.uniform(1.0, 6.0)
                quiet += 1
            spell_end = min(end, time.monotonic() + length)
            while time.monotonic() < spell_end:
                q0 = time.monotonic()
                st = d.status()
                took = time.monotonic() - q0
                working = any(r["state"] == "running" for r in st["runs"])
                status_times.append(took)
                if took > 0.5:
                    slow.append((time.strftime("%H:%M:%S"), round(took, 2)))
                sampler.sample()
                if rss_start is None and time.monotonic() >= warm_at:
                    rss_start = sampler.rows[-1][1]
                if time.monotonic() - last_report > 30:
                    last_report = time.monotonic()
                    say(
                        f"  {int(end - time.monotonic())} s left: {len(st['runs'])} live, "
                        f"{st['queue_length']} queued, rss "
                        f"{sampler.rows[-1][1] / 2**20:.1f} MB"
                    )
                time.sleep(0.25)
        d.machine("input")
        sampler.sample()
        rss_end = sampler.rows[-1][1]
        rss_start = rss_start or sampler.rows[0][1]
        threads_end, fds_end = sampler.rows[-1][2], sampler.rows[-1][3]
        t_stop = time.monotonic()
        code = d.stop(timeout=30)
        figures["stop_s"] = round(time.monotonic() - t_stop, 1)
        if code != 0:
            problems.append(f"the daemon exited {code} on SIGTERM")

        # --- checks
        orphans = d.alive_agent_pids()
        if orphans:
            problems.append(f"{len(orphans)} agent process(es) outlived the daemon: {orphans}")
        with sqlite3.connect(f"file:{d.home / 'owl.db'}?mode=ro", uri=True) as db:
            states = Counter(s for (s,) in db.execute("SELECT state FROM jobs"))
            open_runs = db.execute("SELECT COUNT(*) FROM runs WHERE ended_at IS NULL").fetchone()[0]
            outcomes = Counter(
                f"{o}/{e}" for o, e in db.execute("SELECT outcome, ended_by FROM runs")
            )
            integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
            nruns = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        bad = {s: n for s, n in states.items() if s not in FINAL_OR_PENDING}
        if bad:
            problems.append(f"Jobs left in a live state after the stop: {bad}")
        if sum(states.values()) != jobs:
            problems.append(f"{jobs} Jobs queued, {sum(states.values())} in the database")
        if open_runs:
            problems.append(f"{open_runs} Run(s) never closed")
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        grown = rss_end - rss_start
        if grown > max(8 * 2**20, rss_start * 0.25):
            problems.append(
                f"daemon memory grew {grown / 2**20:.1f} MB "
                f"({rss_start / 2**20:.1f} -> {rss_end / 2**20:.1f} MB)"
            )
        fds_start = min(r[3] for r in sampler.rows[: max(1, len(sampler.rows) // 4)])
        if fds_end > fds_start + 20:
            problems.append(f"daemon open files grew from {fds_start} to {fds_end}")

        figures.update(
            {
                "minutes": minutes,
                "jobs": jobs,
                "runs": nruns,
                "job_states": dict(states),
                "run_outcomes": dict(outcomes),
                "bursts": bursts,
                "long_bursts": long_bursts,
                "quiet_spells": quiet,
                "status_calls": len(status_times),
                "status_ms_median": round(statistics.median(status_times) * 1000, 1),
                "status_ms_max": round(max(status_times) * 1000, 1),
                "rss_start_mb": round(rss_start / 2**20, 1),
                "rss_end_mb": round(rss_end / 2**20, 1),
                "threads_end": threads_end,
                "fds_start": fds_start,
                "fds_end": fds_end,
                "orphans": len(orphans),
                "integrity": integrity,
            }
        )
        # Not a failed check: the engine answers between its own steps, and a
        # step may wait on git (a worktree made) on a loaded machine. Reported
        # with the moments, to be read against the daemon's log.
        figures["status_slower_than_0.5s"] = slow
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.kill()
        d.kill_leftovers()
    figures["problems"] = problems
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="owl-soak-"))
    print(f"soak: {a.minutes:g} min, {a.jobs} Jobs, seed {a.seed}, in {work}")
    figures = soak(a.minutes, a.jobs, work, a.seed)
    print(json.dumps(figures, indent=2))
    print(f"daemon RSS: start {figures.get('rss_start_mb')} MB, end {figures.get('rss_end_mb')} MB")
    if not a.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    if figures["problems"]:
        print("FAILED:\n  " + "\n  ".join(figures["problems"]))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
