"""Every verb the socket, the tray and the notifier's replies may ask, and
where each is answered.

A view's reads (the review page, `status.wait`) and the daemon's own verbs
are answered on the caller's thread; the verbs whose git runs between two
looks at the state (`owl.verbs.caller_side`) string their halves together
here, calling the engine for each; every other verb runs on the engine
thread. Each argument is checked for its kind and bounds first
(`owl.control.args`).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable

from owl.control import args as control_args
from owl.engine.loop import Engine
from owl.errors import Refused, StoreError
from owl.rules import bounds
from owl.settings.paths import Paths
from owl.store.db import Store
from owl.verbs import caller_side as verbwork
from owl.verbs import looking, views
from owl.verbs.engine_side import Verbs, check_prompt

WATCH_WAIT = 30.0  # the longest a view's `status.wait` waits for a change


def _every_job(paths: Paths, everything: bool) -> list[dict[str, Any]]:
    """`jobs.list` without a limit: every Job, read-only, off the engine."""
    try:
        store = Store(paths.db, readonly=True)
    except StoreError as e:
        raise Refused(str(e)) from None
    try:
        return views.jobs_list(store, everything)
    finally:
        store.close()


def answer(
    e: Engine,
    paths: Paths,
    about: Callable[[], dict[str, Any]],
    verb: str,
    args: dict[str, Any],
) -> Any:
    """The answer to `verb`: those of a view and of the daemon itself here,
    the rest through the engine's verbs, each on the thread it needs."""
    A = control_args  # each argument checked for its kind and bounds
    if verb in ("jobs.review", "review"):
        # Reads the database and git only, on the caller's thread: a large
        # branch's diff must not hold up the supervisor.
        from owl.review import write_page

        key = "id" if "id" in args else "job_id"
        return {"path": str(write_page(paths, A.ident(args, key)))}
    if verb == "status.wait":
        # A view (a tray joined over the socket) waits here, on the
        # socket's thread, for the next change, then reads the status.
        since = A.optional_whole(args, "since", 0, 2**62)
        wait_s = A.seconds(args, "timeout_s", WATCH_WAIT, WATCH_WAIT)
        generation = e.changes.generation if since is None else e.changes.wait(since, wait_s)
        return {"generation": generation, "status": e.call(lambda: looking.status(e))}
    if verb == "daemon.status":
        return about()
    if verb == "daemon.stop":
        # As the tray's Quit: every Run asked to end (killed 5 s later),
        # then the process exits; the answer goes out first.
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        return dict(about(), stopping=True)
    if verb == "jobs.list" and A.page(args) is None:
        # Every Job, maybe 10,000 rows: read on the caller's thread through
        # a connection of its own, so that the engine is not held up (a
        # page is short, and read by the engine like every other view).
        return _every_job(paths, A.flag(args, "all"))
    if verb in _STARTS_RUNS:
        _catch_up_config(e)
    prepared: dict = {}
    if verb == "add":
        # The project is read (git, .owl.toml) here, on the caller's thread.
        A.attempts(args)
        check_prompt(A.text(args, "prompt"))
        prepared = verbwork.prepare_add(
            e.cfg,
            A.text(args, "prompt"),
            A.text(args, "project"),
            A.optional_text(args, "agent"),
        )
    table = {
        "status": lambda: looking.status(e),
        "add": lambda: Verbs(e).add_prepared(prepared, A.attempts(args)),
        "jobs.list": lambda: views.jobs_page(
            e.store, A.flag(args, "all"), A.page(args) or bounds.MAX_PAGE
        ),
        "jobs.show": lambda: looking.job_view(e, A.ident(args, "id")),
        "jobs.drop": lambda: verbwork.drop(e, A.ident(args, "id"), A.flag(args, "force")),
        "drop": lambda: verbwork.drop(e, A.ident(args, "job_id"), A.flag(args, "force")),
        "accept": lambda: verbwork.accept(
            e, A.ident(args, "job_id"), A.flag(args, "merge"), False, A.flag(args, "anyway")
        ),
        "verify": lambda: verbwork.verify(e, A.ident(args, "job_id")),
        "jobs.accept": lambda: verbwork.accept(
            e,
            A.ident(args, "id"),
            A.flag(args, "merge"),
            A.flag(args, "delete_branch"),
            A.flag(args, "anyway"),
            A.flag(args, "unsigned"),
        ),
        "jobs.extend": lambda: Verbs(e).extend(A.ident(args, "id"), A.attempts(args)),
        "jobs.move": lambda: Verbs(e).move(A.ident(args, "id"), A.position(args)),
        "jobs.reply": lambda: Verbs(e).reply(
            A.ident(args, "id"), A.text(args, "text"), A.flag(args, "first")
        ),
        "jobs.verify": lambda: verbwork.verify(
            e, A.ident(args, "id"), A.optional_text(args, "checks_from")
        ),
        "start": lambda: verbwork.start(e),
        "pause": lambda: Verbs(e).pause(),
        "resume": lambda: Verbs(e).resume(),
        "stop": lambda: Verbs(e).stop_runs(A.flag(args, "force")),
        "machine": lambda: e.machine_event(A.text(args, "event")),
        "shift.start": lambda: Verbs(e).shift_start(
            A.seconds(args, "for_s", 3600.0, bounds.MAX_SHIFT_S),
            A.flag(args, "until_empty"),
            A.flag(args, "require_power"),
            A.flag(args, "replace"),
            A.flag(args, "spend"),
        ),
        "shift_start": lambda: Verbs(e).shift_start(
            A.seconds(args, "for_s", 3600.0, bounds.MAX_SHIFT_S), False, False, False
        ),
        "shift.stop": lambda: Verbs(e).shift_stop(),
        "shift.status": lambda: looking.shift_view(e),
        "agents.wake": lambda: Verbs(e).wake_agent(A.text(args, "name")),
        "ping": lambda: {"pid": os.getpid(), "socket": str(paths.socket)},
    }
    if verb in _IN_HALVES:
        return table[verb]()  # their git runs here, between engine calls
    fn = table.get(verb)
    if fn is None:
        raise Refused(f"unknown verb {verb!r}")
    return verbwork.finish(e.call(fn))


# Verbs whose git comes between two looks at the state: `owl.verbs.caller_side` strings
# their halves together on the caller's thread, calling the engine for each.
_IN_HALVES = frozenset(
    {"drop", "jobs.drop", "accept", "jobs.accept", "verify", "jobs.verify", "start"}
)

# Verbs that may start a Run at once (or queue one that does): a config edit
# saved just before them must be in force for that Run.
_STARTS_RUNS = frozenset({"add", "start", "resume", "jobs.extend", "jobs.reply"})


def _catch_up_config(e: Engine) -> None:
    """Look at the config file now, on the caller's thread (the watch looks
    only every second), and if it changed let the engine take the edit in
    before this verb: its queue is in order, so one round trip does."""
    watch = getattr(e, "config_watch", None)
    if watch is not None and watch.look(wait=1.0):
        e.call(lambda: None)
