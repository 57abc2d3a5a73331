"""`owl logs RUN [-f]`: a Run's output, with claude's stream-json made readable."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from owl.errors import Refused, StoreError
from owl.paths import Paths


def _lines(chunk: str, stream_json: bool, raw: bool):
    from owl.agents.render import render_line

    for line in chunk.splitlines():
        if raw or not stream_json:
            yield line
        else:
            out = render_line(line)
            if out is not None:
                yield out


def show(paths: Paths, run_id: int, *, follow: bool = False, raw: bool = False,
         as_json: bool = False) -> int:
    """Print a Run's log; with `follow`, keep printing until the Run has ended.

    Reads the database read-only: it works with no daemon running, and never
    competes with the daemon for a write lock."""
    import json

    from owl.store import Store

    try:
        store = Store(paths.db, readonly=True)
    except StoreError as e:
        raise Refused(str(e)) from None
    run = store.run(run_id)
    if run is None:
        raise Refused(f"no run {run_id}")
    job = store.job(run["job_id"])
    stream_json = bool(job and job["agent"] == "claude")
    path = Path(run["log"] or paths.logs / f"{run_id}.log")
    if not path.exists():
        if not follow:
            raise Refused(f"run {run_id} has no log at {path}")
    pos, pending = 0, ""
    out = sys.stdout

    def emit(lines) -> None:
        for line in lines:
            if as_json:
                out.write(json.dumps({"run": run_id, "line": line}, ensure_ascii=False) + "\n")
            else:
                out.write(line + "\n")
    while True:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                f.seek(0, 2)
                size = f.tell()
                if size < pos:
                    pos = 0          # rotated
                f.seek(pos)
                data = f.read()
                pos = f.tell()
        except FileNotFoundError:
            data = ""
        if data:
            text = pending + data
            complete, sep, pending = text.rpartition("\n")
            if sep:
                emit(_lines(complete, stream_json, raw))
            out.flush()
        if not follow:
            if pending:
                emit(_lines(pending, stream_json, raw))
            return 0
        run = store.run(run_id)
        if run is not None and run["ended_at"] is not None and not data:
            if pending:
                emit(_lines(pending, stream_json, raw))
            out.flush()
            return 0
        time.sleep(0.2)
