"""A Run's start-of-Run snapshot (`owl.git.outside`) kept on disk, so a crash loses no comparison.

The engine holds the snapshot in memory (`Live.outside_before`) and compares
it when the Run ends. A daemon killed during the Run (SIGKILL, the OOM
killer) takes that memory with it, so the snapshot is also written beside
the Run's log as `<logs>/<run_id>.outside.json`, and removed once the Run's
`outside` is recorded. Whatever file is left is a Run whose comparison was
never recorded: crash recovery (`crash_recovery.recover`) compares it with the
project as it is then (`compare_by`, bounded in time), records it and
removes it.

The file may be megabytes (a big `packed-refs`, in base64) and the engine
thread never waits on the disk, so every write and removal is handed to one
worker thread, in the order asked: a Run that ends at once never has its
file written back after its removal.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from owl.git import outside
from owl.settings.paths import write_atomic

log = logging.getLogger("owl.outside")

SUFFIX = ".outside.json"
_NAME = re.compile(r"^([0-9]+)" + re.escape(SUFFIX) + "$")
_worker = concurrent.futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="owl-outside-keep"
)


def path_for(logs: Path, run_id: int) -> Path:
    return Path(logs) / f"{run_id}{SUFFIX}"


def _later(work: Callable[[], None]) -> concurrent.futures.Future:
    try:
        return _worker.submit(work)
    except RuntimeError:  # the interpreter is shutting down: do it here
        done: concurrent.futures.Future = concurrent.futures.Future()
        work()
        done.set_result(None)
        return done


def keep(
    logs: Path, run_id: int, project: Path | str, snap: outside.Snapshot
) -> concurrent.futures.Future:
    """Write the Run's snapshot on the worker thread (the engine does not wait)."""

    def work() -> None:
        try:
            write(path_for(logs, run_id), run_id, project, snap)
        except OSError as e:
            log.warning(
                "run %s: the snapshot of its project's refs, config and hooks "
                "could not be kept on disk (%s): a crash during the Run would "
                "lose what it changed outside its branch",
                run_id,
                e,
            )

    return _later(work)


def forget(logs: Path, run_id: int) -> concurrent.futures.Future:
    """Remove the Run's snapshot on the worker thread, after any write still queued."""
    return _later(lambda: remove(path_for(logs, run_id)))


def write(path: Path, run_id: int, project: Path | str, snap: outside.Snapshot) -> None:
    """Atomically: a temp file in the same folder, flushed, then renamed over `path`."""
    text = (
        f'{{"run_id": {int(run_id)}, "project": {json.dumps(str(project))}, '
        f'"snapshot": {outside.to_json(snap)}}}'
    )
    write_atomic(path, text.encode("ascii"), sync=True)


def read(path: Path) -> tuple[int, str, outside.Snapshot]:
    """(run id, project, snapshot) from a kept file; ValueError or OSError if unreadable."""
    data = json.loads(path.read_bytes())
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("run_id"), int)
        or not isinstance(data.get("project"), str)
    ):
        raise ValueError("not a kept snapshot")
    return data["run_id"], data["project"], outside.from_json(json.dumps(data.get("snapshot")))


def remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("could not remove %s: %s", path, e)


def left(logs: Path | None) -> list[tuple[int, Path]]:
    """The kept snapshots in `logs`, by Run id (temp files of a write cut short
    are removed: their rename never happened)."""
    if logs is None:
        return []
    try:
        entries = list(os.scandir(logs))
    except OSError:
        return []
    found = []
    for entry in entries:
        m = _NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), Path(entry.path)))
        elif entry.name.startswith(".") and SUFFIX + "." in entry.name:
            remove(Path(entry.path))
    return sorted(found)


def compare_by(
    before: outside.Snapshot,
    project: Path,
    ignore: Callable[[str], bool],
    deadline: float,
    store: str | None = None,
) -> list[dict[str, Any]] | None:
    """`outside.changes` of `before` with the project now, given up on at
        `deadline` (monotonic; at least a second), with the refs of the Job's
    `store`: a project on a mount that hangs
        holds up no recovery, and says so as an `unknown` entry."""
    box: list[Any] = []

    def work() -> None:
        try:
            after = outside.take(project, store)
            box.append(outside.changes(before, after, ignore_ref=ignore))
        except Exception as e:  # git failing or timing out: still an answer
            box.append([outside.unknown(f"{project}: could not be compared ({e})")])

    wait = max(1.0, deadline - time.monotonic())
    t = threading.Thread(target=work, daemon=True, name="owl-outside-recover")
    t.start()
    t.join(wait)
    if not box:
        return [outside.unknown(f"{project}: did not answer within {wait:.0f} s")]
    return box[0]
