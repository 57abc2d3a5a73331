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
module holds the Jobs' queries and the settings, and `Store` is made of one
class a table besides (runs, checks, replies, limits, verb intents, the
notify channels' seen ids), each in a module of its own.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from owl.rules import jobtable
from owl.store import schema as store_schema
from owl.store.checks import CheckRows
from owl.store.limits import LimitRows
from owl.store.notify_seen import NotifySeen
from owl.store.replies import ReplyRows
from owl.store.runs import RunRows
from owl.store.schema import MIGRATIONS, SCHEMA_VERSION
from owl.store.transaction import inserted_id
from owl.store.verb_intents import VerbIntents

__all__ = ["JOB_STATES", "MIGRATIONS", "QUEUED", "SCHEMA_VERSION", "Store", "title_of"]

JOB_STATES = jobtable.STATES
QUEUED = jobtable.QUEUED

_JOB_COLS = (
    "id, prompt, project, agent, state, sort_key, attempts, failures, branch, "
    "worktree, base, reason, created_at, updated_at, base_branch"
)


def title_of(prompt: str, width: int = 60) -> str:
    """A Job's prompt cut to one line, for lists and the tray, with nothing in it
    that would act on a terminal or a menu."""
    from owl import textsafe

    line = textsafe.line(" ".join(prompt.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


class Store(RunRows, CheckRows, ReplyRows, LimitRows, VerbIntents, NotifySeen):
    """The database, opened by one thread (the daemon's engine, or a reader).

    The Jobs' queries and the settings are here; each other table's are in a
    module of its own (see `owl.store.transaction`)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.db = store_schema.connect(self.path, readonly=readonly)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------- settings

    def setting(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.tx():
            self.db.execute(
                "INSERT INTO settings(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(value)),
            )

    # ----------------------------------------------------------------- jobs

    def add_job(
        self, prompt: str, project: str, agent: str, attempts: int, now: float | None = None
    ) -> int:
        now = time.time() if now is None else now
        with self.tx():
            key = self.db.execute("SELECT COALESCE(MAX(sort_key), 0) + 1 FROM jobs").fetchone()[0]
            cur = self.db.execute(
                "INSERT INTO jobs(prompt, project, agent, state, sort_key, attempts, "
                "created_at, updated_at) VALUES(?, ?, ?, 'pending', ?, ?, ?, ?)",
                (prompt, project, agent, key, attempts, now, now),
            )
            return inserted_id(cur)

    def job(self, job_id: int) -> dict[str, Any] | None:
        row = self.db.execute(f"SELECT {_JOB_COLS} FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None:
            return None
        job = _job(row)
        job["position"] = self.position(job_id) if job["state"] in QUEUED else None
        return job

    def jobs(
        self, states: Iterable[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Jobs in queue order, with positions for the queued ones.

        `limit` keeps views (the status document) from reading the whole table
        when the queue is long; the LIMIT goes to SQLite, which walks the
        (state, sort_key) index and stops early."""
        cap = -1 if limit is None else int(limit)
        if states is None:
            rows = self.db.execute(
                f"SELECT {_JOB_COLS} FROM jobs ORDER BY sort_key LIMIT ?", (cap,)
            ).fetchall()
        else:
            st = tuple(states)
            rows = self.db.execute(
                f"SELECT {_JOB_COLS} FROM jobs WHERE state IN ({','.join('?' * len(st))}) "
                "ORDER BY sort_key LIMIT ?",
                (*st, cap),
            ).fetchall()
        out, pos = [], 0
        for row in rows:
            job = _job(row)
            if job["state"] in QUEUED:
                pos += 1
                job["position"] = pos
            else:
                job["position"] = None
            out.append(job)
        if (
            states is not None
            and not set(states) >= set(QUEUED)
            and any(job["state"] in QUEUED for job in out)
        ):
            # positions must count every queued Job, not only the selected ones
            positions = self.positions()
            for job in out:
                job["position"] = positions.get(job["id"])
        return out

    def newest_jobs(self, states: Iterable[str], limit: int) -> list[dict[str, Any]]:
        """At most `limit` Jobs in `states`, the newest (highest id) first, each
        with its queue position: a page of a long list, read without the rest."""
        st = tuple(states)
        rows = self.db.execute(
            f"SELECT {_JOB_COLS} FROM jobs WHERE state IN ({','.join('?' * len(st))}) "
            "ORDER BY id DESC LIMIT ?",
            (*st, int(limit)),
        ).fetchall()
        out = [_job(row) for row in rows]
        for job in out:
            job["position"] = self.position(job["id"]) if job["state"] in QUEUED else None
        return out

    def branches(self, project: str) -> set[str]:
        """Every branch a Job of `project` has had (Owl's own, not the person's)."""
        rows = self.db.execute(
            "SELECT branch FROM jobs WHERE project=? AND branch IS NOT NULL", (project,)
        ).fetchall()
        return {r[0] for r in rows}

    def positions(self) -> dict[int, int]:
        rows = self.db.execute(
            "SELECT id FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key"
        ).fetchall()
        return {row[0]: i for i, row in enumerate(rows, start=1)}

    def position(self, job_id: int) -> int | None:
        row = self.db.execute(
            "SELECT j.state, (SELECT COUNT(*) FROM jobs k WHERE k.state IN ('pending','active') "
            "AND k.sort_key <= j.sort_key) FROM jobs j WHERE j.id=?",
            (job_id,),
        ).fetchone()
        if row is None or row[0] not in QUEUED:
            return None
        return int(row[1])

    def pending(self) -> list[tuple[int, str]]:
        """(id, project) of pending Jobs in queue order: what the scheduler reads."""
        return [
            (r[0], r[1])
            for r in self.db.execute(
                "SELECT id, project FROM jobs WHERE state='pending' ORDER BY sort_key"
            )
        ]

    def pending_agents(self) -> list[str]:
        """The `agent` of every pending Job, each once (a name, or names joined by ",")."""
        return [
            r[0] for r in self.db.execute("SELECT DISTINCT agent FROM jobs WHERE state='pending'")
        ]

    def first_pending(
        self,
        skip_projects: set[str] | frozenset[str] = frozenset(),
        skip_jobs: set[int] | frozenset[int] = frozenset(),
        skip_agents: set[str] | frozenset[str] = frozenset(),
    ) -> tuple[int, str] | None:
        """(id, project) of the first pending Job not skipped by project, id or agent."""
        projects, jobs, agents = tuple(skip_projects), tuple(skip_jobs), tuple(skip_agents)
        row = self.db.execute(
            "SELECT id, project FROM jobs WHERE state='pending' "
            + (f"AND project NOT IN ({','.join('?' * len(projects))}) " if projects else "")
            + (f"AND id NOT IN ({','.join('?' * len(jobs))}) " if jobs else "")
            + (f"AND agent NOT IN ({','.join('?' * len(agents))}) " if agents else "")
            + "ORDER BY sort_key LIMIT 1",
            projects + jobs + agents,
        ).fetchone()
        return (row[0], row[1]) if row else None

    def set_job(self, job_id: int, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.tx():
            self.db.execute(f"UPDATE jobs SET {cols} WHERE id=?", (*fields.values(), job_id))

    def apply(self, job_id: int, event: jobtable.Event, **fields: Any) -> str:
        """Record what `jobtable` decides `event` makes of Job `job_id` (with
        `fields` beside the state), in one transaction; returns the new state.

        Raises jobtable.NotAllowed where the table has no such transition: the
        verbs ask `jobtable.refusal` first, so that is a bug, not a person's error."""
        with self.tx():
            row = self.db.execute("SELECT state FROM jobs WHERE id=?", (job_id,)).fetchone()
            if row is None:
                raise jobtable.NotAllowed(f"job {job_id} does not exist")
            new = jobtable.after(event, row[0])
            fields = {"state": new.value, **fields, "updated_at": time.time()}
            cols = ", ".join(f"{k}=?" for k in fields)
            self.db.execute(f"UPDATE jobs SET {cols} WHERE id=?", (*fields.values(), job_id))
            return new.value

    def move(self, job_id: int, position: int) -> None:
        """Put a pending Job at a queue position (1 = head), keeping the others' order."""
        with self.tx():
            ids = [
                r[0]
                for r in self.db.execute(
                    "SELECT id FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key"
                )
            ]
            keys = [
                r[0]
                for r in self.db.execute(
                    "SELECT sort_key FROM jobs WHERE state IN ('pending','active') ORDER BY sort_key"
                )
            ]
            ids.remove(job_id)
            ids.insert(position - 1, job_id)
            self.db.executemany(
                "UPDATE jobs SET sort_key=? WHERE id=?",
                [(-(i + 1), jid) for i, jid in enumerate(ids)],
            )
            self.db.executemany("UPDATE jobs SET sort_key=? WHERE id=?", list(zip(keys, ids)))

    def counts(self) -> dict[str, int]:
        """How many Jobs are in each state (for `owl status` with no daemon)."""
        return {
            r[0]: r[1] for r in self.db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")
        }

    def queue_length(self) -> int:
        return self.db.execute(
            "SELECT COUNT(*) FROM jobs WHERE state IN ('pending','active')"
        ).fetchone()[0]

    def pending_count(self) -> int:
        """The Jobs of the queue that wait for a Run (not the ones working now)."""
        return self.db.execute("SELECT COUNT(*) FROM jobs WHERE state = 'pending'").fetchone()[0]

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]


def _job(row: sqlite3.Row) -> dict[str, Any]:
    job = dict(row)
    job["attempts_left"] = max(0, job["attempts"] - job["failures"])
    job["title"] = title_of(job["prompt"])
    return job
