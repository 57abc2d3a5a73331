"""The schema of Owl's SQLite file, and the opening that checks and upgrades it.

Apart from `store`, which holds the queries: those assume a file that has
passed through `connect` (the header, `quick_check`, the schema version) and
has every table the migrations below make. What the file is lives here; what
Owl reads and writes in it lives there.

Schema changes are numbered migrations keyed by `PRAGMA user_version`, each
applied once in a transaction of its own. A new one is appended to
`MIGRATIONS` with a comment saying what it holds; `SCHEMA_VERSION` follows
from the list. A file from a newer Owl, or one that is not a database, is
refused and left untouched; an empty or damaged one is said in one line
(`dbrepair`). A read-only opener (a command with no daemon running) never
upgrades a file, so it refuses an older one too.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from owl.errors import DamagedStore, StoreError
from owl.store import damage

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE jobs (
        id          INTEGER PRIMARY KEY,
        prompt      TEXT NOT NULL,
        project     TEXT NOT NULL,
        agent       TEXT NOT NULL,
        state       TEXT NOT NULL,
        sort_key    INTEGER NOT NULL,
        attempts    INTEGER NOT NULL,
        failures    INTEGER NOT NULL DEFAULT 0,
        branch      TEXT,
        worktree    TEXT,
        base        TEXT,
        reason      TEXT,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    );
    CREATE INDEX jobs_by_state ON jobs(state, sort_key);
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY,
        job_id      INTEGER NOT NULL REFERENCES jobs(id),
        attempt     INTEGER NOT NULL,
        state       TEXT NOT NULL,
        frozen_by   TEXT,
        started_at  REAL NOT NULL,
        ended_at    REAL,
        outcome     TEXT,
        ended_by    TEXT,
        reason      TEXT,
        exit_code   INTEGER,
        pids        TEXT NOT NULL DEFAULT '[]',
        log         TEXT
    );
    CREATE INDEX runs_by_job ON runs(job_id);
    CREATE INDEX runs_open ON runs(ended_at) WHERE ended_at IS NULL;
    CREATE TABLE settings (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 2: the outcome of every check a Run (or `owl jobs verify`) ran
    """
    CREATE TABLE checks (
        id          INTEGER PRIMARY KEY,
        job_id      INTEGER NOT NULL REFERENCES jobs(id),
        run_id      INTEGER REFERENCES runs(id),
        position    INTEGER NOT NULL,
        name        TEXT NOT NULL,
        command     TEXT NOT NULL,
        outcome     TEXT NOT NULL,
        exit_code   INTEGER,
        duration_s  REAL,
        output      TEXT NOT NULL DEFAULT '',
        log         TEXT,
        batch       TEXT,
        ended_at    REAL NOT NULL
    );
    CREATE INDEX checks_by_run ON checks(run_id);
    CREATE INDEX checks_by_job ON checks(job_id, batch);
    """,
    # 3: processes of a Run the system would not let Owl signal ({pid, command,
    # why} as JSON), and the wall-clock end of a frozen Run's grace window
    # (for the watchdog, which keeps that promise when the daemon is stopped)
    """
    ALTER TABLE runs ADD COLUMN untouchable TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE runs ADD COLUMN grace_ends_at REAL;
    """,
    # 4: the branch a Job's worktree was made from, which `accept --merge` brings it into
    """
    ALTER TABLE jobs ADD COLUMN base_branch TEXT;
    """,
    # 5: what a Run changed outside its branch (refs, git config, hooks), as the
    # JSON list owl.git.outside.changes() makes; NULL: not compared
    """
    ALTER TABLE runs ADD COLUMN outside TEXT;
    """,
    # 6: a Run's conversation (session id, whether it carried one on), what it
    # cost (usage: JSON of duration_ms, num_turns, tokens, total_cost_usd) and
    # its final message; the person's replies to a Job (run_id: the Run that
    # was given it); and each agent's usage-limit wait, kept across restarts
    """
    ALTER TABLE runs ADD COLUMN session_id TEXT;
    ALTER TABLE runs ADD COLUMN resumed INTEGER;
    ALTER TABLE runs ADD COLUMN usage TEXT;
    ALTER TABLE runs ADD COLUMN last_message TEXT;
    CREATE TABLE replies (
        id          INTEGER PRIMARY KEY,
        job_id      INTEGER NOT NULL REFERENCES jobs(id),
        text        TEXT NOT NULL,
        at          REAL NOT NULL,
        run_id      INTEGER REFERENCES runs(id)
    );
    CREATE INDEX replies_by_job ON replies(job_id);
    CREATE TABLE limits (
        agent       TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        until       REAL NOT NULL,
        reason      TEXT NOT NULL,
        strikes     INTEGER NOT NULL DEFAULT 0,
        since       REAL NOT NULL
    );
    """,
    # 7: which agent did each Run (a Job may name several: the next one
    # carries it on while the first waits on a usage limit); NULL: the Job's own
    """
    ALTER TABLE runs ADD COLUMN agent TEXT;
    """,
    # 8: the ids of replies already read from a channel (owl.notify.replies), so
    # that a replay after a restart is never acted on twice. Self-contained: it may
    # take any number in the list.
    """
    CREATE TABLE IF NOT EXISTS notify_seen (
        channel     TEXT NOT NULL,
        id          TEXT NOT NULL,
        at          REAL NOT NULL,
        PRIMARY KEY (channel, id)
    );
    """,
    # 9: a verb that changes git and the store (drop, accept), written before
    # its git runs and deleted once it is all done, so the next start finishes
    # (or undoes) what a crash cut short; args: JSON of its flags; step: how
    # far it got (e.g. "removing": the worktree's removal had begun)
    """
    CREATE TABLE verb_intents (
        job_id      INTEGER PRIMARY KEY REFERENCES jobs(id),
        verb        TEXT NOT NULL,
        args        TEXT NOT NULL,
        step        TEXT,
        at          REAL NOT NULL
    );
    """,
    # 10: the `python3` a check's PATH gave it ("" none), which `owl jobs show` says,
    # and the commit whose .owl.toml declared the check (what gated the Job)
    """
    ALTER TABLE checks ADD COLUMN python3 TEXT;
    ALTER TABLE checks ADD COLUMN source TEXT;
    """,
    # 11: how each Run was contained, as the views say it ("contained: bwrap 0.8,
    # own network", "not contained: ..."); NULL: started before Owl contained Runs
    """
    ALTER TABLE runs ADD COLUMN contained TEXT;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """The file opened for the Store: checked, and (unless read-only) brought
    up to SCHEMA_VERSION; a file that cannot be used raises StoreError (or
    DamagedStore) with one line that names it, and is left as it was."""
    if path.exists() and path.stat().st_size == 0:
        # Owl writes the header the moment it makes the file: an empty one
        # was truncated, and is not an empty queue.
        raise DamagedStore(damage.empty(path))
    if readonly:
        if not path.exists():
            raise StoreError(f"{path}: no database yet (nothing has been queued)")
        uri = f"file:{path}?mode=ro"
        db = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
        )
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = not path.exists()
        if fresh:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    db.row_factory = sqlite3.Row
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: written by a newer Owl (schema {version}, this one knows "
                f"{SCHEMA_VERSION}); left untouched"
            )
        ok = db.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise DamagedStore(damage.damaged(path, ok))
        if not readonly:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        if not readonly:
            migrate(db, version)
        elif version < SCHEMA_VERSION:
            raise StoreError(f"{path}: from an older Owl; start the daemon once to upgrade it")
    except sqlite3.DatabaseError as e:
        db.close()
        if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
            raise StoreError(f"{path}: busy ({e})") from None
        raise DamagedStore(
            f"{path}: not a usable Owl database ({e}); left untouched — {damage.RECOVER_HINT}"
        ) from None
    except StoreError:
        db.close()
        raise
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists() and not readonly:
            try:
                side.chmod(0o600)
            except OSError:
                pass
    return db


def migrate(db: sqlite3.Connection, version: int) -> None:
    """Apply every migration after `version`, each in a transaction of its own
    that also sets `user_version`: a crash leaves the file at a whole step."""
    for number in range(version, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[number]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
