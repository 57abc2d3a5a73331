"""Start the daemon in the background when a verb needs one, as tmux starts its server.

`owl add`, `owl start` and `owl shift start` call `ensure()`; `owl daemon
--detach` calls `detach()`. The daemon is `python -m owl daemon` with this
interpreter and this environment (so the same OWL_HOME and OWL_MACHINE), in a
session of its own so the terminal's hangup does not reach it, its output
appended to `owl.log` in Owl's log folder (where the daemon logs anyway).

Two commands racing to start one: the spawn is made under an exclusive flock
on `spawn.lock`, and each command asks the socket again once it holds the
lock, so the second finds the first one's daemon instead of starting its own.
(The daemon's own lock would refuse a second daemon anyway; this keeps the
loser from printing that refusal.)

Where this home's daemon is a systemd user unit (`owl autostart on`, on a
systemd desktop), it is started through the user manager instead, never in
the terminal's scope: the unit is what gives it its cgroup, its PATH, its OOM
policy and its restart.
"""

from __future__ import annotations

import os
import sys
import time

from owl.errors import NoDaemon, Refused, Unreachable

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

START_TIMEOUT = 20.0  # a loaded 2-core machine starts the daemon in 0.3-3 s
UNIT_START_TIMEOUT = 120.0


def disabled() -> bool:
    """OWL_NO_AUTOSTART=1 (or any value but 0/empty) keeps verbs from starting one."""
    return os.environ.get("OWL_NO_AUTOSTART", "") not in ("", "0")


def log_path(paths) -> "Path":
    return paths.logs / "owl.log"  # daemon.LOG_NAME: the daemon then does not open it twice


def running_pid(paths) -> int | None:
    """The pid of this home's daemon, answering at the socket worked out here
    or at the one its lock names (`owl.control.locate`); None when none runs.
    Unreachable when one holds the home's lock without answering."""
    answer = _ping(paths)
    return None if answer is None else int(answer["pid"])


def _ping(paths) -> dict | None:
    """The daemon's answer to ping (its pid and socket), or None when none runs."""
    from owl.control import locate

    try:
        return locate.ask(str(paths.socket), lambda: str(paths.lock), "ping", timeout=5.0)
    except Unreachable:
        raise
    except NoDaemon:
        return None


def answering(paths) -> int | None:
    """`running_pid`, waiting out a daemon that holds the lock while it starts;
    Refused (one line) for one that holds it and does not answer."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            return running_pid(paths)
        except Unreachable as e:
            if not e.starting or time.monotonic() >= deadline:
                raise Refused(str(e)) from None
        time.sleep(0.05)


def ensure(paths) -> int | None:
    """Start a daemon if none runs for this home. Returns the new daemon's pid,
    or None when one was already there. Raises Refused (one line) if it cannot
    start, or if one holds the home without answering."""
    if answering(paths) is not None:
        return None
    return _start(paths)


def _start(paths) -> int | None:
    import fcntl
    import subprocess

    paths.ensure()
    # Beside the home's lock, not in a runtime folder the environment moves.
    fd = os.open(paths.db.parent / "spawn.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if answering(paths) is not None:
            return None  # another command started it while we waited
        unit = _through_unit(paths)
        if unit is not None:
            return unit
        log = log_path(paths)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "owl", "daemon"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                close_fds=True,
                env=dict(os.environ, OWL_NO_AUTOSTART="1"),
            )
        return _wait_ready(paths, proc, log)
    finally:
        os.close(fd)


def _through_unit(paths) -> int | None:
    """Start the daemon as its systemd user unit, where one is installed for this
    home; its pid once it answers, or None when there is no such unit (or the
    manager cannot be asked: then said on stderr, and the caller starts one)."""
    from owl.autostart import systemd
    from owl.autostart.command import owl_environment

    if not systemd.unit_path().exists():
        return None
    why = systemd.start(owl_environment())
    if why:
        print(f"owl: {why}; starting the daemon here instead", file=sys.stderr)
    if why is not None:
        return None
    # The manager says when the unit failed; while it runs, its daemon is starting
    # (a slow machine, a long login shell): waited for longer than one of our own.
    deadline = time.monotonic() + UNIT_START_TIMEOUT
    look = 0.0
    while time.monotonic() < deadline:
        try:
            pid = running_pid(paths)
        except Unreachable as e:
            if not e.starting:
                raise Refused(str(e)) from None
            pid = None
        if pid is not None:
            return pid
        if time.monotonic() >= look:
            look = time.monotonic() + 1.0
            down = systemd.failed()
            if down:
                raise Refused(f"the daemon did not start: {down}")
        time.sleep(0.05)
    raise Refused(f"{systemd.UNIT} did not answer within {UNIT_START_TIMEOUT:g} s")


def _wait_ready(paths, proc: "subprocess.Popen", log: "Path") -> int:
    from owl.settings import daemonlock

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            pid = running_pid(paths)
        except Unreachable as e:
            if not e.starting:
                raise Refused(str(e)) from None
            pid = None  # ours, or another (the tray's), still starting
        if pid is not None:
            return pid
        if proc.poll() is not None:
            holder = daemonlock.holder(str(paths.lock))
            if holder is None or not holder.alive():
                raise Refused(f"the daemon did not start: {_last_line(log)} (log: {log})")
            # (it lost the home's lock to another, the tray's, still starting:
            # wait for that one to answer)
        time.sleep(0.05)
    raise Refused(f"the daemon did not answer within {START_TIMEOUT:g} s (log: {log})")


def _last_line(log: "Path") -> str:
    """The log's last line (it holds every daemon's output, so only its tail is read)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return "no log"
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    return lines[-1].removeprefix("owl: ") if lines else "it exited without a word"


def announce(paths, pid: int | None) -> None:
    """One line on stderr (stdout stays the verb's answer) when a daemon was started."""
    if pid is not None:
        print(f"owl: started the daemon {_where(paths, pid)}", file=sys.stderr)


def _where(paths, pid: int) -> str:
    """'as the user unit owl.service (pid N)' or 'in the background (pid N; log F)'."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            unit = "/owl.service" in f.read()
    except OSError:
        unit = False
    if unit:
        return f"as the user unit owl.service (pid {pid}; journalctl --user -u owl.service)"
    return f"in the background (pid {pid}; log {log_path(paths)})"


def ask_starting(a, verb_name: str, args: dict | None = None):
    """Ask the daemon; if none runs, start one (unless --no-start or
    OWL_NO_AUTOSTART) and ask again. No extra round trip when one runs; none
    started beside a daemon that holds the home without answering."""
    from owl.cli.common import ask, paths

    try:
        return ask(verb_name, args)
    except Unreachable as e:
        if not e.starting:
            raise Refused(str(e)) from None
    except NoDaemon:
        if getattr(a, "no_start", False) or disabled():
            raise
    p = paths()
    announce(p, ensure(p))
    return ask(verb_name, args)


def detach() -> int:
    """`owl daemon --detach`: a daemon in the background, or the one already there."""
    from owl.cli.common import paths

    p = paths()
    if answering(p) is not None:
        there = _ping(p) or {}
        print(
            f"the daemon is already running (pid {there.get('pid')}, socket {there.get('socket')})"
        )
        return 0
    pid = _start(p) or running_pid(p)
    print(f"the daemon is running {_where(p, pid) if pid else 'in the background'}")
    return 0
