"""The verb_intents table: a drop or accept about to change a Job's git, noted
before it does, so that `owl.verbs.recovery` finishes or undoes one a crash
cut short."""

from __future__ import annotations

import json
import time
from typing import Any

from owl.store.transaction import Tables


class VerbIntents(Tables):
    """Verbs begun and not ended, with the step each had reached."""

    def begin_verb(
        self, job_id: int, verb: str, args: dict[str, Any], now: float | None = None
    ) -> None:
        """Record that `verb` is about to change Job `job_id`'s git (before it does)."""
        with self.tx():
            self.db.execute(
                "INSERT OR REPLACE INTO verb_intents(job_id, verb, args, step, at) "
                "VALUES(?, ?, ?, NULL, ?)",
                (job_id, verb, json.dumps(args), time.time() if now is None else now),
            )

    def verb_step(self, job_id: int, step: str) -> None:
        with self.tx():
            self.db.execute("UPDATE verb_intents SET step=? WHERE job_id=?", (step, job_id))

    def end_verb(self, job_id: int) -> None:
        with self.tx():
            self.db.execute("DELETE FROM verb_intents WHERE job_id=?", (job_id,))

    def verbs_under_way(self) -> list[dict[str, Any]]:
        """Every verb begun and not ended: {job_id, verb, args (a dict), step, at}."""
        rows = self.db.execute("SELECT * FROM verb_intents ORDER BY at").fetchall()
        out = []
        for row in rows:
            item = dict(row)
            try:
                args = json.loads(item["args"])
            except ValueError:
                args = {}
            item["args"] = args if isinstance(args, dict) else {}
            out.append(item)
        return out
