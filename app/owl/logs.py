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


def show(paths: Paths, run_id: int, *, follow: bool = False, raw: bool = False) -> int:
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
            complete, _, pending = text.rpartition("\n")
            for line in _lines(complete, stream_json, raw):
                out.write(line + "\n")
            out.flush()
        if not follow:
            if pending:
                for line in _lines(pending, stream_json, raw):
                    out.write(line + "\n")
            return 0
        run = store.run(run_id)
        if run is not None and run["ended_at"] is not None and not data:
            if pending:
                for line in _lines(pending, stream_json, raw):
                    out.write(line + "\n")
            return 0
        time.sleep(0.2)
