"""The runs table: a Run opened, its fields, its end with its Job's new state,
and every Run a crash left open closed `interrupted`.

A Run's end and what `jobtable` decides for its Job are one transaction, so
the Job's state never disagrees with its last Run's."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from owl.rules import jobtable
from owl.store.transaction import Tables, inserted_id

_RUN_COLS = (
    "id, job_id, attempt, state, frozen_by, started_at, ended_at, outcome, "
    "ended_by, reason, exit_code, pids, log, untouchable, grace_ends_at, outside, "
    "session_id, resumed, usage, last_message, agent, contained"
)


class RunRows(Tables):
    """A Job's Runs: see the module docstring."""

    def start_run(self, job_id: int, log: str | None = None, now: float | None = None) -> int:
        """Open a Run for a pending Job and make the Job active, in one transaction."""
        now = time.time() if now is None else now
        with self.tx():
            attempt = self.db.execute(
                "SELECT COUNT(*) + 1 FROM runs WHERE job_id=?", (job_id,)
            ).fetchone()[0]
            cur = self.db.execute(
                "INSERT INTO runs(job_id, attempt, state, started_at, log) "
                "VALUES(?, ?, 'running', ?, ?)",
                (job_id, attempt, now, log),
            )
            current = self.db.execute("SELECT state FROM jobs WHERE id=?", (job_id,)).fetchone()[0]
            self.db.execute(
                "UPDATE jobs SET state=?, reason=NULL, updated_at=? WHERE id=?",
                (jobtable.after(jobtable.Event.START, current).value, now, job_id),
            )
            return inserted_id(cur)

    def set_run(self, run_id: int, **fields: Any) -> None:
        for key in ("pids", "untouchable"):
            if key in fields and not isinstance(fields[key], str):
                fields[key] = json.dumps(fields[key])
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.tx():
            self.db.execute(f"UPDATE runs SET {cols} WHERE id=?", (*fields.values(), run_id))

    def finish_run(
        self,
        run_id: int,
        outcome: str,
        ended_by: str | None,
        reason: str | None,
        exit_code: int | None,
        now: float | None = None,
        job_state: str | None = None,
        spent: tuple[str, str] | None = None,
    ) -> str:
        """Close a Run and record what `jobtable` decides for its Job, in one
        transaction; returns the Job's new state.

        `spent` = (state, reason): the checks failed, so spending the last
        attempt blocks the Job (with that reason) rather than exhausting it.
        `job_state` = "blocked" turns a success into a broken workspace."""
        now = time.time() if now is None else now
        with self.tx():
            row = self.db.execute(
                "SELECT j.id, j.state, j.attempts, j.failures FROM runs r JOIN jobs j "
                "ON j.id = r.job_id WHERE r.id=?",
                (run_id,),
            ).fetchone()
            self.db.execute(
                "UPDATE runs SET state='ended', frozen_by=NULL, ended_at=?, outcome=?, "
                "ended_by=?, reason=?, exit_code=? WHERE id=?",
                (now, outcome, ended_by, reason, exit_code, run_id),
            )
            job_id, current, attempts, failures = row
            if current != jobtable.State.ACTIVE:
                return str(current)  # dropped while ending: leave it as the person said
            event = jobtable.run_end(
                outcome,
                failures=failures,
                attempts=attempts,
                checks_failed=spent is not None,
                succeeded_to=jobtable.State(job_state) if job_state else None,
            )
            new = jobtable.after(event, current)
            if jobtable.TABLE[event].spends_attempt:
                failures += 1
            job_reason = {
                jobtable.Event.FAILED_LAST: reason,
                jobtable.Event.CHECKS_LAST: spent[1] if spent else reason,
            }.get(event)
            self.db.execute(
                "UPDATE jobs SET state=?, failures=?, reason=?, updated_at=? WHERE id=?",
                (new.value, failures, job_reason, now, job_id),
            )
            return new.value

    def runs(self, job_id: int) -> list[dict[str, Any]]:
        return [
            _run(r)
            for r in self.db.execute(
                f"SELECT {_RUN_COLS} FROM runs WHERE job_id=? ORDER BY id", (job_id,)
            )
        ]

    def run(self, run_id: int) -> dict[str, Any] | None:
        row = self.db.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id=?", (run_id,)).fetchone()
        return _run(row) if row else None

    def open_runs(self) -> list[dict[str, Any]]:
        return [
            _run(r)
            for r in self.db.execute(
                f"SELECT {_RUN_COLS} FROM runs WHERE ended_at IS NULL ORDER BY id"
            )
        ]

    def last_run(self, job_id: int) -> dict[str, Any] | None:
        """A Job's latest Run, or None (one indexed row, for the status document)."""
        row = self.db.execute(
            f"SELECT {_RUN_COLS} FROM runs WHERE job_id=? ORDER BY id DESC LIMIT 1", (job_id,)
        ).fetchone()
        return _run(row) if row else None

    def recent_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        return [
            _run(r)
            for r in self.db.execute(
                f"SELECT {_RUN_COLS} FROM runs WHERE ended_at IS NOT NULL "
                "ORDER BY ended_at DESC, id DESC LIMIT ?",
                (limit,),
            )
        ]

    def recover(
        self, reason: str, ended_by: dict[int, str | None], now: float | None = None
    ) -> list[int]:
        """After a crash: close every open Run interrupted, Jobs back to pending in place."""
        now = time.time() if now is None else now
        with self.tx():
            open_ids = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE ended_at IS NULL")]
            for rid in open_ids:
                self.db.execute(
                    "UPDATE runs SET state='ended', frozen_by=NULL, ended_at=?, "
                    "outcome='interrupted', ended_by=?, reason=? WHERE id=?",
                    (now, ended_by.get(rid), reason, rid),
                )
            to = jobtable.after(jobtable.Event.RECOVERED, jobtable.State.ACTIVE)
            self.db.execute(
                "UPDATE jobs SET state=?, updated_at=? WHERE state=?",
                (to.value, now, jobtable.State.ACTIVE.value),
            )
        return open_ids

    def runs_since(self, since: float) -> list[dict[str, Any]]:
        """Every Run started at `since` or later: its agent (or its Job's) and usage."""
        out = []
        for run_agent, job_agent, usage in self.db.execute(
            "SELECT runs.agent, jobs.agent, runs.usage FROM runs JOIN jobs "
            "ON jobs.id = runs.job_id WHERE runs.started_at >= ?",
            (since,),
        ):
            try:
                parsed = json.loads(usage) if usage else None
            except ValueError:
                parsed = None
            out.append(
                {
                    "agent": run_agent or (job_agent or "").split(",")[0],
                    "usage": parsed if isinstance(parsed, dict) else None,
                }
            )
        return out


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
