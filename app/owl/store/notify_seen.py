"""The notify_seen table: which of a channel's messages were read already, so
that a reply is carried out once however often the channel shows it."""

from __future__ import annotations

import time

from owl.store.transaction import Tables


class NotifySeen(Tables):
    """The ids of the messages the person's channels brought."""

    def seen_once(
        self, channel: str, ident: str, now: float | None = None, keep_s: float = 30 * 86400.0
    ) -> bool:
        """Note that a channel's message `ident` was read; True the first time only.
        Ids older than `keep_s` are forgotten (their messages are older than any start)."""
        now = time.time() if now is None else now
        with self.tx():
            cur = self.db.execute(
                "INSERT OR IGNORE INTO notify_seen(channel, id, at) VALUES(?, ?, ?)",
                (channel, ident, now),
            )
            if cur.rowcount == 1:
                self.db.execute("DELETE FROM notify_seen WHERE at < ?", (now - keep_s,))
        return cur.rowcount == 1
