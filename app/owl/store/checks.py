"""The checks table: each check's result, of a Run or of `owl jobs verify`."""

from __future__ import annotations

import time
from typing import Any

from owl.store.transaction import Tables, inserted_id


class CheckRows(Tables):
    """The checks a Run ran, and those `owl jobs verify` ran again (a batch)."""

    def add_check(
        self,
        *,
        job_id: int,
        run_id: int | None,
        position: int,
        name: str,
        command: str,
        outcome: str,
        exit_code: int | None,
        duration_s: float | None,
        output: str,
        log: str | None = None,
        batch: str | None = None,
        python3: str | None = None,
        source: str | None = None,
        now: float | None = None,
    ) -> int:
        """Record one check's result: of a Run (run_id) or of `owl jobs verify` (batch)."""
        now = time.time() if now is None else now
        with self.tx():
            cur = self.db.execute(
                "INSERT INTO checks(job_id, run_id, position, name, command, outcome, exit_code, "
                "duration_s, output, log, batch, python3, source, ended_at) "
                "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job_id,
                    run_id,
                    position,
                    name,
                    command,
                    outcome,
                    exit_code,
                    duration_s,
                    output,
                    log,
                    batch,
                    python3,
                    source,
                    now,
                ),
            )
            return inserted_id(cur)

    def checks(self, run_id: int) -> list[dict[str, Any]]:
        """A Run's checks, in the order they ran."""
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT * FROM checks WHERE run_id=? ORDER BY position, id", (run_id,)
            )
        ]

    def verification(self, job_id: int) -> list[dict[str, Any]]:
        """The checks of the latest `owl jobs verify` of a Job (none if never asked)."""
        row = self.db.execute(
            "SELECT batch FROM checks WHERE job_id=? AND run_id IS NULL ORDER BY id DESC LIMIT 1",
            (job_id,),
        ).fetchone()
        if row is None:
            return []
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT * FROM checks WHERE job_id=? AND run_id IS NULL AND batch=? "
                "ORDER BY position, id",
                (job_id, row[0]),
            )
        ]
