"""Faults: the daemon killed at any moment, a full disk, a broken database, a broken config.

Everything runs for real: the real `owl daemon`, the real `owl` command, real
agents (tests/agents/agent.py) and real signals. The daemon is killed with
SIGKILL, which it cannot catch: whatever it was doing is cut off mid-way, and
only its watchdog and the next start can put things right.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from owlproc import (
    OwlDaemon,
    SocketOwl,
    all_stopped,
    freeze_a_run,
    make_project,
    process_states,
    wait_for,
)
from support.smalldisk import fill, small_disk_fixture

FINAL_OR_QUEUED = {"pending", "review", "exhausted", "blocked", "done", "cancelled"}


# ------------------------------------------------------------------ helpers


def watchdogs(home: Path) -> list[psutil.Process]:
    """Live watchdog processes guarding this home's database."""
    db = str(home / "owl.db")
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if "owl.daemon.watchdog" in cmd and db in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def db_rows(home: Path, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(f"file:{home / 'owl.db'}?mode=ro", uri=True, timeout=5) as db:
        return db.execute(sql, args).fetchall()


def integrity(home: Path) -> str:
    return db_rows(home, "PRAGMA integrity_check")[0][0]


def check_after_restart(d: OwlDaemon, added: list[int]) -> None:
    """What must hold after any crash, once the daemon is back."""
    # no process of an earlier Run is alive (recovery ran before the daemon answered)
    assert d.alive_agent_pids() == [], process_states(d.agent_pids())
    st = d.status()
    assert st["runs"] == []  # the machine is in use: nothing started
    jobs = dict(db_rows(d.home, "SELECT id, state FROM jobs"))
    # every Job that `owl add` acknowledged is still there, and none is active
    # without a live Run
    assert set(added) <= set(jobs), (added, jobs)
    assert all(s in FINAL_OR_QUEUED for s in jobs.values()), jobs
    # the queue keeps the order the Jobs were added in
    queued = [
        r[0]
        for r in db_rows(
            d.home, "SELECT id FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key"
        )
    ]
    assert queued == [j for j in sorted(jobs) if jobs[j] == "pending"]
    assert [q["id"] for q in st["queue"]] == queued
    assert [q["position"] for q in st["queue"]] == list(range(1, len(queued) + 1))
    # every Run is closed, with an outcome, and a reason unless it succeeded
    for rid, ended_at, outcome, reason in db_rows(
        d.home, "SELECT id, ended_at, outcome, reason FROM runs"
    ):
        assert ended_at is not None and outcome in ("succeeded", "failed", "interrupted"), rid
        assert outcome == "succeeded" or reason, (rid, outcome, reason)
    assert integrity(d.home) == "ok"


# ---------------------------------------------------- killed at random moments

# The scenario: queue, start, freeze, thaw, freeze again, grace expiry (Term),
# kill (5 s later: the first agent traps SIGTERM), the next start. Seed n runs
# phases 0..n % len(PHASES), waits a random moment, then SIGKILLs the daemon.
A = "trap-term setsid-child=30 tick=0.2 sleep=30"  # frozen, thawed, killed
B = "setsid-child=30 sleep=0.4 exit=0"  # succeeds, leaves a child
C = "sleep=0.3 exit=3"  # fails: exhausted
D = "sleep=30"  # waits its turn


def _phases(d: OwlDaemon, project: Path, added: list[int]) -> list:
    def add(*prompts: str):
        def run() -> None:
            for p in prompts:
                extra = ("--attempts", "1") if p == C else ()
                added.append(d.add(p, project, *extra))

        return run

    def first_run(state: str, timeout: float = 15.0):
        return lambda: d.wait_run(added[0], state, timeout=timeout)

    def machine(event: str, then):
        def run() -> None:
            d.machine(event)
            then()

        return run

    return [
        add(A, B),
        add(C, D),
        # (running, and both agents past their first steps: A traps TERM)
        machine(
            "idle",
            lambda: (
                first_run("running")(),
                wait_for(lambda: len(d.agent_pids()) >= 4, what="both agents and their children"),
            ),
        ),
        machine("input", first_run("frozen")),
        machine("idle", first_run("running")),
        machine("input", first_run("frozen")),
        first_run("ending"),
        lambda: d.wait_job(added[0], "pending", timeout=15),
        machine("idle", lambda: wait_for(lambda: d.status()["runs"], what="a new Run")),
    ]


@pytest.mark.parametrize("seed", range(50))
def test_daemon_killed_at_a_random_moment_recovers(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    project = make_project(tmp_path / "proj")
    d = SocketOwl(
        tmp_path / "home",
        {
            "idle": {"after": "1s"},
            "interruption": {"grace_window": "1s"},
            "runs": {"max_parallel": 2},
        },
    )
    added: list[int] = []
    try:
        d.start()
        [guard] = wait_for(lambda: watchdogs(d.home), what="the watchdog")
        phases = _phases(d, project, added)
        for phase in phases[: seed % len(phases) + 1]:
            phase()
        time.sleep(rng.uniform(0.0, 0.6))
        d.kill()
        d.start()  # waits for the old watchdog's lock, then recovers
        wait_for(
            lambda: not guard.is_running() or guard.status() == psutil.STATUS_ZOMBIE,
            what="the dead daemon's watchdog to finish",
        )
        check_after_restart(d, added)
        assert d.stop() == 0
        wait_for(lambda: watchdogs(d.home) == [], what="the watchdog to leave with the daemon")
    finally:
        d.kill_all()


# ------------------------------------------------------ killed while frozen


@contextlib.contextmanager
def _frozen_and_guarded(
    tmp_path: Path,
) -> Iterator[tuple[SocketOwl, int, list[int], psutil.Process]]:
    """A daemon with a long grace window, one Run frozen in it, and its watchdog:
    (daemon, Job, the Run's pids, watchdog)."""
    project = make_project(tmp_path / "proj")
    with SocketOwl(tmp_path / "home", {"interruption": {"grace_window": "10m"}}) as d:
        job, pids = freeze_a_run(d, project, "trap-term setsid-child=60 tick=0.2 sleep=60")
        [guard] = watchdogs(d.home)
        yield d, job, pids, guard


def test_watchdog_ends_a_frozen_run_when_the_daemon_dies(tmp_path: Path) -> None:
    with _frozen_and_guarded(tmp_path) as (d, job, pids, guard):
        t0 = time.monotonic()
        d.kill()
        # no restart: the guard alone ends every process, stopped ones too
        wait_for(
            lambda: d.alive_agent_pids() == [], timeout=10, what="the frozen processes to be killed"
        )
        took = time.monotonic() - t0
        wait_for(lambda: not guard.is_running(), what="the watchdog to exit")
        # and it recorded the Run interrupted, the Job back in the queue
        [(outcome, ended_by, reason)] = db_rows(
            d.home, "SELECT outcome, ended_by, reason FROM runs"
        )
        assert (outcome, ended_by) == ("interrupted", "sigkill")
        assert "daemon stopped" in reason
        assert db_rows(d.home, "SELECT state FROM jobs WHERE id=?", job) == [("pending",)]
        assert took < 5.0, took
        d.proc = None


def test_next_start_ends_a_frozen_run_when_the_watchdog_died_too(tmp_path: Path) -> None:
    with _frozen_and_guarded(tmp_path) as (d, job, pids, guard):
        guard.kill()  # both die at once, as under the OOM killer
        guard.wait(5)
        d.kill()
        time.sleep(0.3)
        assert all(s == psutil.STATUS_STOPPED for s in process_states(pids).values())
        d.start()
        assert d.alive_agent_pids() == []
        j = d.job(job)
        assert j["state"] == "pending" and j["position"] == 1
        [r] = j["runs"]
        assert (r["outcome"], r["ended_by"]) == ("interrupted", "sigkill")
        assert len(watchdogs(d.home)) == 1  # the new daemon has its own


def test_clean_stop_takes_the_watchdog_with_it_and_touches_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    d = SocketOwl(tmp_path / "home").start()
    [guard] = watchdogs(d.home)
    job = d.add("sleep=60", project)
    assert d.stop() == 0
    wait_for(
        lambda: not guard.is_running() or guard.status() == psutil.STATUS_ZOMBIE,
        what="the watchdog to exit",
    )
    assert watchdogs(d.home) == []
    # the watchdog is never part of a Run and carries no Run tag
    assert db_rows(d.home, "SELECT state FROM jobs WHERE id=?", job) == [("pending",)]


def test_watchdog_is_not_part_of_any_run(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with SocketOwl(tmp_path / "home", {"interruption": {"grace_window": "1s"}}) as d:
        [guard] = watchdogs(d.home)
        env = guard.environ()
        assert not {"OWL_RUN_ID", "OWL_INSTANCE", "OWL_JOB_ID"} & set(env)
        assert guard.ppid() == d.proc.pid
        assert os.getsid(guard.pid) != os.getsid(d.proc.pid)
        job = d.add("trap-term setsid-child=60 sleep=60", project)
        d.machine("idle")
        run = d.wait_run(job, "running")
        assert guard.pid not in run["pids"]
        d.machine("input")
        d.wait_job(job, "pending", timeout=15)  # frozen, Term, Kill: the guard stays
        assert guard.is_running() and guard.status() != psutil.STATUS_ZOMBIE


# --------------------------------------------------------------- disk full

small_disk = small_disk_fixture("8m")


def test_full_disk_refuses_new_jobs_keeps_runs_and_loses_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    project = make_project(tmp_path / "proj")
    d = SocketOwl(
        small_disk / "home",
        # the old full disk's path, not the floor's (tests/test_run_caps.py)
        {"interruption": {"grace_window": "30s"}, "runs": {"disk_floor": "off"}},
    )
    d.keep_pids_in(tmp_path)  # off the full disk
    try:
        d.start()
        # alive until told, however slowly a busy machine fills the disk
        go = tmp_path / "go"
        first, *rest = [d.add(f"until={go} exit=0 job{i}", project) for i in range(3)]
        d.machine("idle")
        run = d.wait_run(first, "running")
        wait_for(d.agent_pids, what="the agent's pid")  # noted before it is frozen
        filler = fill(small_disk)
        # a new Job is refused, in one line that says why and where
        p = d.owl("add", "--project", str(project), "sleep=1")
        assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
        [line] = p.stderr.strip().splitlines()
        assert "disk" in line and "full" in line and str(d.home) in line, line
        # the live Run is still supervised: frozen and thawed
        d.machine("input")
        assert d.wait_run(first, "frozen")["id"] == run["id"]
        wait_for(lambda: all_stopped(d.agent_pids()), what="the agent stopped")
        d.machine("idle")
        d.wait_run(first, "running")
        go.touch()
        # the agent writes into Owl's pipe, so the full disk does not fail it;
        # its end is written into the room Owl kept back. The daemon stays up
        # and answers at once, and starts nothing new while the disk is full
        wait_for(lambda: d.run_of(first) is None, timeout=15, what="the Run to end")
        t0 = time.monotonic()
        st = d.status()
        assert time.monotonic() - t0 < 1.0
        assert st["runs"] == [] and "full" in (st["waiting"] or ""), st["waiting"]
        j = d.job(first)
        assert j["state"] == "review" and j["runs"][0]["outcome"] == "succeeded", j
        # room again: nothing stored was lost
        d.machine("input")
        filler.unlink()
        assert [x["id"] for x in d.status()["queue"]] == rest
        assert d.add("sleep=1", project) == rest[-1] + 1
        assert d.stop() == 0
    finally:
        d.kill_all()
    assert integrity(d.home) == "ok"


# --------------------------------------------------------- a bad database


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refuses(home: Path) -> subprocess.CompletedProcess:
    d = SocketOwl(home)
    p = subprocess.run(
        [sys.executable, "-m", "owl", "daemon"],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    return p


def test_corrupt_database_is_refused_and_left_byte_identical(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SocketOwl(home) as d:
        d.add("sleep=1", make_project(tmp_path / "proj"))
    db = home / "owl.db"
    data = bytearray(db.read_bytes())
    for off in range(200, len(data), 97):  # scribble over the pages, keep the header
        data[off] ^= 0x5A
    db.write_bytes(bytes(data))
    files = {p.name: _digest(p) for p in home.glob("owl.db*")}
    p = _refuses(home)
    assert p.returncode == 1
    [line] = p.stderr.strip().splitlines()[-1:]
    assert str(db) in line and "untouched" in line, p.stderr
    assert {q.name: _digest(q) for q in home.glob("owl.db*")} == files
    assert watchdogs(home) == []


def test_database_from_a_newer_owl_is_refused_and_left_byte_identical(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SocketOwl(home) as d:
        d.add("sleep=1", make_project(tmp_path / "proj"))
    db = home / "owl.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA journal_mode=DELETE")
        c.execute("PRAGMA user_version = 99")
    files = {p.name: _digest(p) for p in home.glob("owl.db*")}
    p = _refuses(home)
    assert p.returncode == 1
    line = p.stderr.strip().splitlines()[-1]
    assert str(db) in line and "newer" in line, p.stderr
    assert {q.name: _digest(q) for q in home.glob("owl.db*")} == files


def test_a_file_that_is_not_a_database_is_refused_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "owl.db"
    db.write_bytes(b"these are my notes, not a database\n" * 100)
    before = _digest(db)
    p = _refuses(home)
    assert p.returncode == 1 and str(db) in p.stderr
    assert _digest(db) == before
    assert sorted(q.name for q in home.glob("owl.db*")) == ["owl.db"]


# ------------------------------------------------- config broken while running


def test_config_edited_into_nonsense_keeps_the_last_good_one(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with SocketOwl(tmp_path / "home", {"interruption": {"grace_window": "2s"}}) as d:
        cfg = d.home / "config.toml"
        good = cfg.read_text()
        cfg.write_text(good + '\n[interruption]\ngrace_window = "soon"\n')  # duplicate table
        problem = wait_for(
            lambda: d.status()["config_problem"], timeout=10, what="the config problem to show"
        )
        assert str(cfg) in problem and "last good config" in problem
        cfg.write_text(good.replace('grace_window = "2s"', 'grace_window = "soon"'))
        problem = wait_for(
            lambda: (
                "grace_window" in (d.status()["config_problem"] or "")
                and d.status()["config_problem"]
            ),
            timeout=10,
            what="the key to be named",
        )
        assert "interruption.grace_window" in problem and '"soon"' in problem
        assert "\n" not in problem
        # the last good config is in force: a 2 s grace window, not a broken one
        job = d.add("trap-term sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        d.machine("input")
        frozen = d.wait_run(job, "frozen")
        assert frozen["grace_left_s"] <= 2.0
        d.wait_job(job, "pending", timeout=15)
        # fixing the file clears the problem
        cfg.write_text(good)
        wait_for(
            lambda: d.status()["config_problem"] is None, timeout=10, what="the problem to clear"
        )
