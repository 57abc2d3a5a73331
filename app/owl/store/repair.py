"""A damaged `owl.db`: said in one line, checked, and saved row by row.

SQLite refuses a file whose pages do not read back, but most of a damaged
file usually still reads: every page but the few that were overwritten. This
module says so in one line (for every verb that reads the file), checks it
(`owl db check`), and copies every row that SQLite can still read into a
fresh file with Owl's own schema (`owl db recover`), keeping the damaged one
beside it. The copy tries the `sqlite3` command's `.recover` first (it reads
the pages themselves, where it was built with them), and otherwise walks each
table by rowid in Python, stepping over the rows it cannot read.

The daemon must not run meanwhile: recovery takes the daemon's lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from owl.store.damage import RECOVER_HINT, damaged, empty  # noqa: F401  (said from here too)

_PROBE_PAST = 4096  # rowids probed one by one past the last one read


@dataclass
class Report:
    """What `owl db check` found."""

    path: Path
    ok: bool
    text: str
    counts: dict[str, int] = field(default_factory=dict)
    version: int | None = None


@dataclass
class Recovered:
    """What `owl db recover` saved, and where the damaged file went."""

    path: Path
    kept: Path | None
    method: str
    saved: dict[str, int]

    @property
    def text(self) -> str:
        n = self.saved
        jobs, runs = n.get("jobs", 0), n.get("runs", 0)
        kept = f"; the damaged file is kept as {self.kept}" if self.kept else ""
        return (
            f"saved {jobs} Job{'s' if jobs != 1 else ''} and {runs} Run"
            f"{'s' if runs != 1 else ''} ({n.get('checks', 0)} check results, "
            f"{n.get('settings', 0)} settings) into {self.path} by {self.method}{kept}"
        )


# ------------------------------------------------------------------- check


def _open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=5.0)


def check(path: Path) -> Report:
    """Read every page of the database (`PRAGMA integrity_check`) and count its rows."""
    path = Path(path)
    if not path.exists():
        return Report(path, True, f"{path}: not there yet; the daemon makes it when it starts")
    if path.stat().st_size == 0:
        return Report(path, False, empty(path))
    try:
        db = _open_ro(path)
    except sqlite3.Error as e:
        return Report(path, False, damaged(path, str(e)))
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        rows = db.execute("PRAGMA integrity_check(20)").fetchall()
        problems = [r[0] for r in rows if r[0] != "ok"]
        if problems:
            more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
            return Report(path, False, damaged(path, problems[0] + more), version=version)
        counts = {
            t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in ("jobs", "runs", "checks")
            if _has_table(db, t)
        }
    except sqlite3.DatabaseError as e:
        return Report(path, False, damaged(path, str(e)))
    finally:
        db.close()
    return Report(
        path,
        True,
        f"{path}: ok · {counts.get('jobs', 0)} Jobs, "
        f"{counts.get('runs', 0)} Runs · schema {version}",
        counts,
        version,
    )


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return (
        db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
        is not None
    )


# ----------------------------------------------------------------- recover


def recover(path: Path, lock: Path, *, use_cli: bool = True) -> Recovered:
    """Copy every readable row of `path` into a fresh file at `path`, the damaged
    file (and its -wal, -shm) kept beside it as `<name>.damaged-<time>`.

    Holds `lock` (the daemon's) throughout, so no daemon starts meanwhile;
    raises RuntimeError, one line, when the daemon runs or nothing is there."""
    path = Path(path)
    if not path.exists():
        raise RuntimeError(f"{path}: not there; there is nothing to recover")
    with _daemon_lock(lock):
        report = check(path)
        if report.ok:
            raise RuntimeError(f"{report.text}; nothing to recover")
        kept = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        fresh = path.with_name(f"{path.name}.recovering")
        for side in (fresh, Path(f"{fresh}-wal"), Path(f"{fresh}-shm")):
            side.unlink(missing_ok=True)
        _build_empty(fresh)
        method = "a row-by-row copy"
        if use_cli and path.stat().st_size and _cli_recover(path, fresh):
            method = "sqlite3 .recover"
        elif path.stat().st_size:
            _build_empty(fresh, again=True)
            _copy_rows(path, fresh)
        saved = _counts(fresh)
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{path}{suffix}")
            if src.exists():
                os.replace(src, f"{kept}{suffix}")
        os.replace(fresh, path)
        return Recovered(path, kept, method, saved)


class _daemon_lock:
    """The daemon's own lock, taken without waiting: a running daemon refuses."""

    def __init__(self, lock: Path) -> None:
        self.lock = lock
        self.fd = -1

    def __enter__(self) -> None:
        self.lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise RuntimeError(
                "the Owl daemon is running and holds the database: stop it "
                "first (it refuses a damaged file, so it is using a good "
                "one)"
            ) from None

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _build_empty(fresh: Path, again: bool = False) -> None:
    """A new database with Owl's schema, no rows, in rollback-journal mode so
    that the single file is the whole of it."""
    from owl.store.db import Store

    if again:
        for side in (fresh, Path(f"{fresh}-wal"), Path(f"{fresh}-shm")):
            side.unlink(missing_ok=True)
    Store(fresh).close()
    db = sqlite3.connect(fresh, isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()


def _cli_recover(src: Path, fresh: Path) -> bool:
    """`sqlite3 SRC .recover`, its rows loaded into `fresh`; False where the
    command is missing or cannot (Debian builds it without sqlite_dbpage)."""
    exe = shutil.which("sqlite3")
    if exe is None:
        return False
    try:
        dump = subprocess.run(
            [exe, "-readonly", str(src), ".recover"],
            capture_output=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if dump.returncode != 0 or b"INSERT" not in dump.stdout:
        return False
    scratch = fresh.with_name(fresh.name + ".sql")
    for side in (scratch, Path(f"{scratch}-journal")):
        side.unlink(missing_ok=True)
    try:
        load = subprocess.run(
            [exe, str(scratch)], input=dump.stdout, capture_output=True, timeout=120
        )
        if load.returncode != 0:
            return False
        _copy_rows(scratch, fresh)
        return True
    except (OSError, subprocess.TimeoutExpired, sqlite3.Error):
        return False
    finally:
        scratch.unlink(missing_ok=True)


def _copy_rows(src: Path, fresh: Path) -> None:
    """Every row of `src` that reads, into the same tables and columns of `fresh`."""
    dst = sqlite3.connect(fresh, isolation_level=None)
    try:
        old = _open_ro(src)
    except sqlite3.Error:
        dst.close()
        return
    try:
        dst.execute("PRAGMA foreign_keys=OFF")
        dst.execute("BEGIN")
        for table in _tables(dst):
            cols = _common_columns(old, dst, table)
            if not cols:
                continue
            names = ", ".join(f'"{c}"' for c in cols)
            insert = f'INSERT OR IGNORE INTO "{table}"(rowid, {names}) VALUES(?{", ?" * len(cols)})'
            for row in _readable_rows(old, table, names):
                try:
                    dst.execute(insert, row)
                except sqlite3.Error:
                    pass  # a value the schema refuses: left out
        dst.execute("COMMIT")
    finally:
        old.close()
        dst.close()


def _tables(db: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]


def _common_columns(old: sqlite3.Connection, dst: sqlite3.Connection, table: str) -> list[str]:
    want = [r[1] for r in dst.execute(f'PRAGMA table_info("{table}")')]
    try:
        have = {r[1] for r in old.execute(f'PRAGMA table_info("{table}")')}
    except sqlite3.DatabaseError:
        have = set(want)  # the schema page is gone: try Owl's own columns
    return [c for c in want if c in have]


def _readable_rows(db: sqlite3.Connection, table: str, names: str):
    """(rowid, *values) of every row that reads, in rowid order.

    A scan stops at the first page that does not read; from there each rowid
    is asked for on its own (which reaches the next good page through the
    table's interior pages) until one reads, and the scan goes on from it."""
    scan = f'SELECT rowid, {names} FROM "{table}" WHERE rowid > ? ORDER BY rowid'
    one = f'SELECT rowid, {names} FROM "{table}" WHERE rowid = ?'
    last, top = -(1 << 63), _top_rowid(db, table)
    while True:
        try:
            for row in db.execute(scan, (last,)):
                last = row[0]
                yield tuple(row)
            return
        except sqlite3.DatabaseError:
            pass
        start = max(last + 1, 0)
        end = max(top, start + _PROBE_PAST) if top is not None else start + _PROBE_PAST
        found = None
        for rowid in range(start, end + 1):
            try:
                row = db.execute(one, (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None:
                found = tuple(row)
                break
        if found is None:
            return
        yield found
        last = found[0]


def _top_rowid(db: sqlite3.Connection, table: str) -> int | None:
    try:
        row = db.execute(f'SELECT MAX(rowid) FROM "{table}"').fetchone()
        return row[0]
    except sqlite3.DatabaseError:
        return None


def _counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in _tables(db)}
    finally:
        db.close()
