"""The one SQLite file that holds Jobs, Runs and the person's settings.

WAL mode so that readers (the CLI when no daemon runs, the tray) never block
the daemon, which is the only writer. Every state change is one transaction:
a Run's end and its Job's new state are written together or not at all.

The queue order is a `sort_key` that never changes on a re-attempt, so a Job
whose Run was interrupted goes back to `pending` in the place it held; only
`move` rewrites keys. Positions shown to people count from 1 at the head of
the queue (pending and active Jobs).

The schema, its migrations and the checks a file passes on opening are in
`store_schema` (re-exported here: `MIGRATIONS`, `SCHEMA_VERSION`); this
module holds the queries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from owl import store_schema
from owl.store_schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["JOB_STATES", "MIGRATIONS", "QUEUED", "SCHEMA_VERSION", "Store", "title_of"]

JOB_STATES = ("pending", "active", "blocked", "review", "done", "cancelled", "exhausted")
QUEUED = ("pending", "active")

_JOB_COLS = ("id, prompt, project, agent, state, sort_key, attempts, failures, branch, "
             "worktree, base, reason, created_at, updated_at, base_branch")
_RUN_COLS = ("id, job_id, attempt, state, frozen_by, started_at, ended_at, outcome, "
             "ended_by, reason, exit_code, pids, log, untouchable, grace_ends_at, outside, "
             "session_id, resumed, usage, last_message")


def title_of(prompt: str, width: int = 60) -> str:
    """A Job's prompt cut to one line, for lists and the tray, with nothing in it
    that would act on a terminal or a menu."""
    from owl import textsafe

    line = textsafe.line(" ".join(prompt.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


class Store:
    """The database, opened by one thread (the daemon's engine, or a reader)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.db = store_schema.connect(self.path, readonly=readonly)

    def close(self) -> None:
        self.db.close()

    def tx(self) -> "_Tx":
        return _Tx(self.db)

    # ------------------------------------------------------------- settings

    def setting(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.tx():
            self.db.execute("INSERT INTO settings(key, value) VALUES(?, ?) "
                            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                            (key, json.dumps(value)))

    # ----------------------------------------------------------------- jobs

    def add_job(self, prompt: str, project: str, agent: str, attempts: int,
                now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self.tx():
            key = self.db.execute("SELECT COALESCE(MAX(sort_key), 0) + 1 FROM jobs").fetchone()[0]
            cur = self.db.execute(
                "INSERT INTO jobs(prompt, project, agent, state, sort_key, attempts, "
                "created_at, updated_at) VALUES(?, ?, ?, 'pending', ?, ?, ?, ?)",
                (prompt, project, agent, key, attempts, now, now))
            return int(cur.lastrowid)

    def job(self, job_id: int) -> dict[str, Any] | None:
        row = self.db.execute(f"SELECT {_JOB_COLS} FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None:
            return None
        job = _job(row)
        job["position"] = self.position(job_id) if job["state"] in QUEUED else None
        return job

    def jobs(self, states: Iterable[str] | None = None,
             limit: int | None = None) -> list[dict[str, Any]]:
        """Jobs in queue order, with positions for the queued ones.

        `limit` keeps views (the status document) from reading the whole table
        when the queue is long; the LIMIT goes to SQLite, which walks the
        (state, sort_key) index and stops early."""
        cap = -1 if limit is None else int(limit)
        if states is None:
            rows = self.db.execute(f"SELECT {_JOB_COLS} FROM jobs ORDER BY sort_key LIMIT ?",
                                   (cap,)).fetchall()
        else:
            st = tuple(states)
            rows = self.db.execute(
                f"SELECT {_JOB_COLS} FROM jobs WHERE state IN ({','.join('?' * len(st))}) "
                "ORDER BY sort_key LIMIT ?", (*st, cap)).fetchall()
        out, pos = [], 0
        for row in rows:
            job = _job(row)
            if job["state"] in QUEUED:
                pos += 1
                job["position"] = pos
            else:
                job["position"] = None
            out.append(job)
        if states is not None and not set(states) >= set(QUEUED) \
                and any(job["state"] in QUEUED for job in out):
            # positions must count every queued Job, not only the selected ones
            positions = self.positions()
            for job in out:
                job["position"] = positions.get(job["id"])
        return out

    def branches(self, project: str) -> set[str]:
        """Every branch a Job of `project` has had (Owl's own, not the person's)."""
        rows = self.db.execute("SELECT branch FROM jobs WHERE project=? AND branch IS NOT NULL",
                               (project,)).fetchall()
        return {r[0] for r in rows}

    def positions(self) -> dict[int, int]:
        rows = self.db.execute(
            "SELECT id FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key").fetchall()
        return {row[0]: i for i, row in enumerate(rows, start=1)}

    def position(self, job_id: int) -> int | None:
        row = self.db.execute(
            "SELECT j.state, (SELECT COUNT(*) FROM jobs k WHERE k.state IN ('pending','active') "
            "AND k.sort_key <= j.sort_key) FROM jobs j WHERE j.id=?", (job_id,)).fetchone()
        if row is None or row[0] not in QUEUED:
            return None
        return int(row[1])

    def pending(self) -> list[tuple[int, str]]:
        """(id, project) of pending Jobs in queue order: what the scheduler reads."""
        return [(r[0], r[1]) for r in self.db.execute(
            "SELECT id, project FROM jobs WHERE state='pending' ORDER BY sort_key")]

    def first_pending(self, skip_projects: set[str] | frozenset[str] = frozenset(),
                      skip_jobs: set[int] | frozenset[int] = frozenset(),
                      skip_agents: set[str] | frozenset[str] = frozenset()
                      ) -> tuple[int, str] | None:
        """(id, project) of the first pending Job not skipped by project, id or agent."""
        projects, jobs, agents = tuple(skip_projects), tuple(skip_jobs), tuple(skip_agents)
        row = self.db.execute(
            "SELECT id, project FROM jobs WHERE state='pending' "
            + (f"AND project NOT IN ({','.join('?' * len(projects))}) " if projects else "")
            + (f"AND id NOT IN ({','.join('?' * len(jobs))}) " if jobs else "")
            + (f"AND agent NOT IN ({','.join('?' * len(agents))}) " if agents else "")
            + "ORDER BY sort_key LIMIT 1", projects + jobs + agents).fetchone()
        return (row[0], row[1]) if row else None

    def set_job(self, job_id: int, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.tx():
            self.db.execute(f"UPDATE jobs SET {cols} WHERE id=?", (*fields.values(), job_id))

    def move(self, job_id: int, position: int) -> None:
        """Put a pending Job at a queue position (1 = head), keeping the others' order."""
        with self.tx():
            ids = [r[0] for r in self.db.execute(
                "SELECT id FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key")]
            keys = [r[0] for r in self.db.execute(
                "SELECT sort_key FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key")]
            ids.remove(job_id)
            ids.insert(position - 1, job_id)
            self.db.executemany("UPDATE jobs SET sort_key=? WHERE id=?",
                                [(-(i + 1), jid) for i, jid in enumerate(ids)])
            self.db.executemany("UPDATE jobs SET sort_key=? WHERE id=?",
                                list(zip(keys, ids)))

    def counts(self) -> dict[str, int]:
        """How many Jobs are in each state (for `owl status` with no daemon)."""
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT state, COUNT(*) FROM jobs GROUP BY state")}

    def queue_length(self) -> int:
        return self.db.execute(
            "SELECT COUNT(*) FROM jobs WHERE state IN ('pending','active')").fetchone()[0]

    # ----------------------------------------------------------------- runs

    def start_run(self, job_id: int, log: str | None = None, now: float | None = None) -> int:
        """Open a Run for a pending Job and make the Job active, in one transaction."""
        now = time.time() if now is None else now
        with self.tx():
            attempt = self.db.execute("SELECT COUNT(*) + 1 FROM runs WHERE job_id=?",
                                      (job_id,)).fetchone()[0]
            cur = self.db.execute(
                "INSERT INTO runs(job_id, attempt, state, started_at, log) "
                "VALUES(?, ?, 'running', ?, ?)", (job_id, attempt, now, log))
            self.db.execute("UPDATE jobs SET state='active', reason=NULL, updated_at=? WHERE id=?",
                            (now, job_id))
            return int(cur.lastrowid)

    def set_run(self, run_id: int, **fields: Any) -> None:
        for key in ("pids", "untouchable"):
            if key in fields and not isinstance(fields[key], str):
                fields[key] = json.dumps(fields[key])
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.tx():
            self.db.execute(f"UPDATE runs SET {cols} WHERE id=?", (*fields.values(), run_id))

    def finish_run(self, run_id: int, outcome: str, ended_by: str | None, reason: str | None,
                   exit_code: int | None, now: float | None = None,
                   job_state: str | None = None, spent: tuple[str, str] | None = None) -> str:
        """Close a Run and move its Job on, in one transaction; returns the Job's new state.

        interrupted -> pending (no attempt spent); failed -> pending or exhausted
        (one attempt spent); succeeded -> review. `job_state` overrides the
        succeeded case; `spent` = (state, reason) overrides what a Job becomes
        when a failure spends its last attempt (blocked by its checks).
        """
        now = time.time() if now is None else now
        with self.tx():
            row = self.db.execute(
                "SELECT j.id, j.state, j.attempts, j.failures FROM runs r JOIN jobs j "
                "ON j.id = r.job_id WHERE r.id=?", (run_id,)).fetchone()
            self.db.execute(
                "UPDATE runs SET state='ended', frozen_by=NULL, ended_at=?, outcome=?, "
                "ended_by=?, reason=?, exit_code=? WHERE id=?",
                (now, outcome, ended_by, reason, exit_code, run_id))
            job_id, current, attempts, failures = row
            if current != "active":
                return current        # dropped while ending: leave it as the person said
            if outcome == "interrupted":
                new, job_reason = "pending", None
            elif outcome == "failed":
                failures += 1
                if failures < attempts:
                    new, job_reason = "pending", None
                else:
                    new, job_reason = spent or ("exhausted", reason)
            else:
                new, job_reason = job_state or "review", None
            self.db.execute("UPDATE jobs SET state=?, failures=?, reason=?, updated_at=? "
                            "WHERE id=?", (new, failures, job_reason, now, job_id))
            return new

    def runs(self, job_id: int) -> list[dict[str, Any]]:
        return [_run(r) for r in self.db.execute(
            f"SELECT {_RUN_COLS} FROM runs WHERE job_id=? ORDER BY id", (job_id,))]

    def run(self, run_id: int) -> dict[str, Any] | None:
        row = self.db.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id=?", (run_id,)).fetchone()
        return _run(row) if row else None

    def open_runs(self) -> list[dict[str, Any]]:
        return [_run(r) for r in self.db.execute(
            f"SELECT {_RUN_COLS} FROM runs WHERE ended_at IS NULL ORDER BY id")]

    def recent_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        return [_run(r) for r in self.db.execute(
            f"SELECT {_RUN_COLS} FROM runs WHERE ended_at IS NOT NULL "
            "ORDER BY ended_at DESC, id DESC LIMIT ?", (limit,))]

    def recover(self, reason: str, ended_by: dict[int, str | None],
                now: float | None = None) -> list[int]:
        """After a crash: close every open Run interrupted, Jobs back to pending in place."""
        now = time.time() if now is None else now
        with self.tx():
            open_ids = [r[0] for r in self.db.execute(
                "SELECT id FROM runs WHERE ended_at IS NULL")]
            for rid in open_ids:
                self.db.execute(
                    "UPDATE runs SET state='ended', frozen_by=NULL, ended_at=?, "
                    "outcome='interrupted', ended_by=?, reason=? WHERE id=?",
                    (now, ended_by.get(rid), reason, rid))
            self.db.execute("UPDATE jobs SET state='pending', updated_at=? WHERE state='active'",
                            (now,))
        return open_ids

    # --------------------------------------------------------------- checks

    def add_check(self, *, job_id: int, run_id: int | None, position: int, name: str,
                  command: str, outcome: str, exit_code: int | None, duration_s: float | None,
                  output: str, log: str | None = None, batch: str | None = None,
                  now: float | None = None) -> int:
        """Record one check's result: of a Run (run_id) or of `owl jobs verify` (batch)."""
        now = time.time() if now is None else now
        with self.tx():
            cur = self.db.execute(
                "INSERT INTO checks(job_id, run_id, position, name, command, outcome, exit_code, "
                "duration_s, output, log, batch, ended_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                (job_id, run_id, position, name, command, outcome, exit_code, duration_s,
                 output, log, batch, now))
            return int(cur.lastrowid)

    def checks(self, run_id: int) -> list[dict[str, Any]]:
        """A Run's checks, in the order they ran."""
        return [dict(r) for r in self.db.execute(
            "SELECT * FROM checks WHERE run_id=? ORDER BY position, id", (run_id,))]

    def verification(self, job_id: int) -> list[dict[str, Any]]:
        """The checks of the latest `owl jobs verify` of a Job (none if never asked)."""
        row = self.db.execute(
            "SELECT batch FROM checks WHERE job_id=? AND run_id IS NULL "
            "ORDER BY id DESC LIMIT 1", (job_id,)).fetchone()
        if row is None:
            return []
        return [dict(r) for r in self.db.execute(
            "SELECT * FROM checks WHERE job_id=? AND run_id IS NULL AND batch=? "
            "ORDER BY position, id", (job_id, row[0]))]

    # -------------------------------------------------- replies and limits

    def add_reply(self, job_id: int, text: str, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self.tx():
            cur = self.db.execute("INSERT INTO replies(job_id, text, at) VALUES(?, ?, ?)",
                                  (job_id, text, now))
            return int(cur.lastrowid)

    def replies(self, job_id: int) -> list[dict[str, Any]]:
        """Every reply to a Job, oldest first (run_id: the Run it was given to)."""
        return [dict(r) for r in self.db.execute(
            "SELECT id, job_id, text, at, run_id FROM replies WHERE job_id=? ORDER BY id",
            (job_id,))]

    def give_replies(self, job_id: int, run_id: int) -> None:
        """The replies no Run has had yet go to this one."""
        with self.tx():
            self.db.execute("UPDATE replies SET run_id=? WHERE job_id=? AND run_id IS NULL",
                            (run_id, job_id))

    def limits(self) -> list[dict[str, Any]]:
        """Every agent's wait (also those already over: their strikes count on)."""
        return [dict(r) for r in self.db.execute(
            "SELECT agent, kind, until, reason, strikes, since FROM limits ORDER BY until")]

    def set_limit(self, agent: str, kind: str, until: float, reason: str, strikes: int,
                  now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self.tx():
            self.db.execute(
                "INSERT INTO limits(agent, kind, until, reason, strikes, since) "
                "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(agent) DO UPDATE SET kind=excluded.kind, "
                "until=excluded.until, reason=excluded.reason, strikes=excluded.strikes, "
                "since=excluded.since", (agent, kind, until, reason, strikes, now))

    def clear_limit(self, agent: str) -> None:
        with self.tx():
            self.db.execute("DELETE FROM limits WHERE agent=?", (agent,))

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error; nests as a no-op."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.outer = False

    def __enter__(self) -> None:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
            self.outer = True

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.outer:
            return
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
            except sqlite3.Error:
                # A COMMIT that failed (SQLITE_FULL) leaves the transaction
                # open; every later write would join it and never commit.
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        else:
            self.db.execute("ROLLBACK")


def _job(row: sqlite3.Row) -> dict[str, Any]:
    job = dict(row)
    job["attempts_left"] = max(0, job["attempts"] - job["failures"])
    job["title"] = title_of(job["prompt"])
    return job


def _run(row: sqlite3.Row) -> dict[str, Any]:
    run = dict(row)
    run["pids"] = json.loads(run["pids"] or "[]")
    run["untouchable"] = json.loads(run.get("untouchable") or "[]")
    run["outside"] = _json_list(run.get("outside"))
    try:
        run["usage"] = json.loads(run["usage"]) if run.get("usage") else None
    except ValueError:
        run["usage"] = None
    return run


def _json_list(text: str | None) -> list[Any] | None:
    """A stored JSON list; None when never written, [] when unreadable."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []
