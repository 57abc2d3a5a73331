"""`owl logs RUN [-f]`: a Run's output, with claude's stream-json made readable.

What the agent wrote may carry escape sequences, carriage returns and bytes
that are not UTF-8. Shown as read, they would act on the person's terminal
(clear it, retitle it, overwrite the line before), so every line is shown
through `textsafe` with its control characters made visible. `--raw` gives
the bytes exactly as written, for a pipe or a person who asks for them.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import BinaryIO, Iterable

from owl import textsafe
from owl.errors import Refused, StoreError
from owl.settings.paths import Paths


def _lines(chunk: bytes, stream_json: bool) -> Iterable[str]:
    """Complete lines of the log as text a person can read, one per line."""
    from owl.agents.render import render_line

    for raw in chunk.split(b"\n"):
        line = textsafe.decode(raw)
        if stream_json:
            out = render_line(line)
            if out is None:
                continue
            line = out
        yield textsafe.block(line.removesuffix("\r")).replace("\n", "\n  ")


def _read_from(path: Path, pos: int) -> tuple[bytes, int]:
    """The bytes of `path` from `pos` on, and where they end; a file shorter than
    `pos` was started afresh (rotated), so it is read from its beginning."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < pos:
                pos = 0
            f.seek(pos)
            data = f.read()
            return data, pos + len(data)
    except FileNotFoundError:
        return b"", pos


def show(
    paths: Paths, run_id: int, *, follow: bool = False, raw: bool = False, as_json: bool = False
) -> int:
    """Print a Run's log; with `follow`, keep printing until the Run has ended.

    Reads the database read-only: it works with no daemon running, and never
    competes with the daemon for a write lock."""
    import json

    from owl.store.db import Store

    try:
        store = Store(paths.db, readonly=True)
        run = store.run(run_id)
    except StoreError as e:
        raise Refused(str(e)) from None
    except sqlite3.DatabaseError as e:
        from owl.store import repair as dbrepair

        raise Refused(dbrepair.damaged(paths.db, str(e))) from None
    if run is None:
        raise Refused(f"no run {run_id}")
    job = store.job(run["job_id"])
    # The built-in agents' events are rendered; a command agent's output is shown as is.
    did = run.get("agent") or (job["agent"].split(",")[0] if job and job["agent"] else "")
    stream_json = did in ("claude", "codex", "gemini", "opencode", "copilot", "pi") and not raw
    path = Path(run["log"] or paths.logs / f"{run_id}.log")
    if not path.exists() and not follow:
        raise Refused(f"run {run_id} has no log at {path}")
    out: BinaryIO = sys.stdout.buffer

    def emit(chunk: bytes) -> None:
        if raw and not as_json:
            out.write(chunk)
            return
        for line in (
            (textsafe.decode(x) for x in chunk.split(b"\n"))
            if as_json and raw
            else _lines(chunk, stream_json)
        ):
            if as_json:
                text = json.dumps({"run": run_id, "line": line}, ensure_ascii=False) + "\n"
            else:
                text = line + "\n"
            out.write(text.encode("utf-8"))

    # The part rotated away, if any, comes first: the log reads on as written.
    pending, _ = _read_from(path.with_name(path.name + ".1"), 0)
    pos = 0
    while True:
        data, pos = _read_from(path, pos)
        if data:
            complete, sep, pending = (pending + data).rpartition(b"\n")
            if sep:
                emit(complete + b"\n" if raw and not as_json else complete)
            out.flush()
        ended = not follow
        if follow:
            run = store.run(run_id)
            ended = run is not None and run["ended_at"] is not None and not data
        if ended:
            if pending:
                emit(pending)
            out.flush()
            return 0
        time.sleep(0.2)
