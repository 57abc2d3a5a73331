"""The replies table: the person's words to a Job, given to its next Run."""

from __future__ import annotations

import time
from typing import Any

from owl.store.transaction import Tables, inserted_id


class ReplyRows(Tables):
    """A Job's replies, and which Run each was given to."""

    def add_reply(self, job_id: int, text: str, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self.tx():
            cur = self.db.execute(
                "INSERT INTO replies(job_id, text, at) VALUES(?, ?, ?)", (job_id, text, now)
            )
            return inserted_id(cur)

    def replies(self, job_id: int) -> list[dict[str, Any]]:
        """Every reply to a Job, oldest first (run_id: the Run it was given to)."""
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT id, job_id, text, at, run_id FROM replies WHERE job_id=? ORDER BY id",
                (job_id,),
            )
        ]

    def give_replies(self, job_id: int, run_id: int) -> None:
        """The replies no Run has had yet go to this one."""
        with self.tx():
            self.db.execute(
                "UPDATE replies SET run_id=? WHERE job_id=? AND run_id IS NULL", (run_id, job_id)
            )
