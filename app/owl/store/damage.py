"""The one-line words for a damaged or empty `owl.db`.

Apart from `owl.store.repair` so that the schema's opener (`owl.store.schema`),
which says them, need not import the repair that builds on the Store.
"""

from __future__ import annotations

from pathlib import Path

RECOVER_HINT = "`owl db recover` saves every row SQLite can still read"


def damaged(path: Path | str, detail: str) -> str:
    """The one line that says a database is damaged and what to do about it."""
    detail = " ".join(str(detail).split())
    return f"{path}: the database is damaged ({detail}); left untouched — {RECOVER_HINT}"


def empty(path: Path | str) -> str:
    """The one line for a database file that Owl made but that holds nothing."""
    return (
        f"{path}: the database is empty (0 bytes) where Owl's queue should be; left "
        f"untouched — restore it from a backup, or run `owl db recover` to start a fresh "
        f"one and keep this file beside it"
    )
