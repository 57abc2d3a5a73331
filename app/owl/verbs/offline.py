"""`owl add --no-start` with no daemon: the Job queued in the database itself.

The daemon is the only writer of the queue while it runs, and it holds
`owl.lock` (flock) for as long as it does. So a Job is written here only
while this process holds that same lock: no daemon can start meanwhile (one
that tries waits, as it does for a dead daemon's watchdog), and none was
running when the lock was taken. The next daemon finds the Job pending in
its place, as if `owl add` had asked it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from owl.errors import Refused
from owl.settings import config as configmod
from owl.settings import daemonlock
from owl.settings.paths import Paths
from owl.store.db import Store
from owl.verbs import caller_side, views
from owl.store.diskroom import disk_full
from owl.verbs.engine_side import check_prompt


@contextlib.contextmanager
def queue_lock(paths: Paths) -> Iterator[None]:
    """The daemon's own lock, taken without waiting; Refused when a daemon holds it."""
    paths.ensure()
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not daemonlock.take_now(fd):
            raise Refused(
                "a daemon is starting for this OWL_HOME and holds the queue; "
                "run the same owl add again in a moment"
            ) from None
        yield  # the pid the file names stays the daemon's: not written here
    finally:
        os.close(fd)  # lets go of the lock


def add(
    paths: Paths, prompt: str, project: str, agent: str | None, attempts: int | None
) -> dict[str, Any]:
    """Queue a Job with no daemon running; the Job as `owl jobs show --json` gives it."""
    try:
        cfg = configmod.load(paths.config)
    except configmod.ConfigError as e:
        raise Refused(str(e)) from None
    check_prompt(prompt)
    from owl.control.args import attempts as checked_attempts

    attempts = checked_attempts({"attempts": attempts})
    prepared = caller_side.prepare_add(cfg, prompt, project, agent)  # git: the project
    with queue_lock(paths):
        full = disk_full(paths.db.parent)
        if full:
            raise Refused(full)
        store = Store(paths.db)
        try:
            job_id = store.add_job(
                prepared["prompt"], prepared["root"], prepared["agent"], attempts or cfg.attempts
            )
            job = store.job(job_id)
            assert job is not None  # added in this transaction's file, under the lock
            return views.job_view(store, job, git=False)
        finally:
            store.close()
