"""The connection every table's queries share, and its one kind of write.

`Store` is made of one class per table (`runs`, `checks`, `replies`,
`limits`, `verb_intents`, `notify_seen`) over `Tables`: each holds its
table's queries, and all write through `Tables.tx`, so that what must change
together (a Run's end and its Job's state) is one transaction whichever
tables it touches.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType


class Tables:
    """The open database and its transactions: what every table's queries use."""

    db: sqlite3.Connection

    def tx(self) -> Tx:
        return Tx(self.db)


class Tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error; nests as a no-op."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.outer = False

    def __enter__(self) -> None:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
            self.outer = True

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The id SQLite gave the row an INSERT just wrote (always set after one)."""
    if cur.lastrowid is None:
        raise sqlite3.InterfaceError("the INSERT wrote no row")
    return cur.lastrowid
