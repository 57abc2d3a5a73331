"""The limits table: each agent's wait (a usage limit, a backoff, the headroom
kept), which a restarted daemon keeps; and what the day's Runs spent."""

from __future__ import annotations

import time
from typing import Any

from owl.store.transaction import Tables


class LimitRows(Tables):
    """One wait an agent, with its strikes."""

    def limits(self) -> list[dict[str, Any]]:
        """Every agent's wait (also those already over: their strikes count on)."""
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT agent, kind, until, reason, strikes, since FROM limits ORDER BY until"
            )
        ]

    def set_limit(
        self,
        agent: str,
        kind: str,
        until: float,
        reason: str,
        strikes: int,
        now: float | None = None,
    ) -> None:
        now = time.time() if now is None else now
        with self.tx():
            self.db.execute(
                "INSERT INTO limits(agent, kind, until, reason, strikes, since) "
                "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(agent) DO UPDATE SET kind=excluded.kind, "
                "until=excluded.until, reason=excluded.reason, strikes=excluded.strikes, "
                "since=excluded.since",
                (agent, kind, until, reason, strikes, now),
            )

    def usages_since(self, since: float) -> list[str]:
        """The recorded usage (JSON) of every Run that ended at or after `since`:
        what the day has spent so far (`owl.rules.budget`)."""
        return [
            r[0]
            for r in self.db.execute(
                "SELECT usage FROM runs WHERE ended_at >= ? AND usage IS NOT NULL", (since,)
            )
        ]

    def clear_limit(self, agent: str) -> None:
        with self.tx():
            self.db.execute("DELETE FROM limits WHERE agent=?", (agent,))
