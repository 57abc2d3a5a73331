"""`owl` / `owl tray`: the tray icon, over the daemon of this OWL_HOME.

When no daemon runs, the tray runs one in its own process: the supervisor
on its worker thread, the input hooks on theirs, and the toolkit's loop on
the main thread (macOS requires it there); Quit then stops both. When a
daemon already runs (`owl add` started one in the background, `owl daemon`,
a systemd unit), the tray joins it over the socket as a client
(`owl.tray.remote`), and its Quit closes the tray only.

Where this home's daemon is a systemd user unit (`owl autostart on` on a
systemd desktop), the tray starts that unit through the user manager and
joins it, rather than running a second kind of daemon in its own process.

Where no tray can be shown (no display, no tray host, only pystray's
menu-less xorg backend) Owl says why in one line and goes on as the headless
daemon (or, joined to one, exits: that daemon goes on without a view).
"""

from __future__ import annotations

import sys

from owl.daemon.main import serve_until_signal, start_daemon
from owl.errors import NoDaemon, Unreachable


def run() -> int:
    joined = _join()
    if joined is not None:
        return joined
    joined = _join_unit()
    if joined is not None:
        return joined
    d = start_daemon()
    if d is None:
        # Lost a race to another daemon starting: join that one instead.
        joined = _join()
        return 1 if joined is None else joined
    d.with_tray = True
    try:
        from owl.tray.app import TrayUnavailable, run_tray
    except Exception as e:  # pragma: no cover - a broken toolkit install
        print(f"owl: no tray ({e}); running without one", file=sys.stderr)
        return serve_until_signal(d)
    try:
        code = run_tray(d)
    except TrayUnavailable as e:
        d.with_tray = False  # `owl daemon status` says so
        print(
            f"owl: no tray: {e}; running without one (owl status shows what happens)",
            file=sys.stderr,
        )
        return serve_until_signal(d)
    d.close()
    return code


def _join_unit() -> int | None:
    """Start this home's user unit and join its daemon; None where there is no
    unit for this home (or the manager cannot start it: then said)."""
    import time

    from owl.autostart import systemd
    from owl.autostart.command import owl_environment

    if not systemd.unit_path().exists():
        return None
    why = systemd.start(owl_environment())
    if why:
        print(f"owl: {why}; running the daemon in the tray instead", file=sys.stderr)
    if why is not None:
        return None
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        joined = _join()
        if joined is not None:
            return joined
        down = systemd.failed()
        if down:
            print(f"owl: the daemon did not start: {down}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"owl: {systemd.UNIT} did not answer within 20 s", file=sys.stderr)
    return 1


def _join() -> int | None:
    """The tray as a client of the daemon already running (wherever the home's
    lock says its socket is); None when none runs."""
    from pathlib import Path

    from owl.settings.paths import get_paths

    paths = get_paths()
    try:
        there = _running(str(paths.socket), str(paths.lock))
    except Unreachable as e:
        print(f"owl: {e}", file=sys.stderr)
        return 1
    if there is None:
        return None
    pid, socket = int(there["pid"]), Path(there.get("socket") or paths.socket)
    from owl.tray.app import TrayUnavailable, run_tray
    from owl.tray.remote import RemoteDaemon

    print(
        f"owl: joining the daemon already running (pid {pid}); Quit closes the tray only "
        "(owl daemon stop stops the daemon)",
        file=sys.stderr,
    )
    try:
        code = run_tray(RemoteDaemon(socket, pid))
    except TrayUnavailable as e:
        print(f"owl: no tray: {e}; the daemon (pid {pid}) goes on", file=sys.stderr)
        return 1
    print(
        f"owl: tray closed; the daemon (pid {pid}) goes on (owl daemon stop stops it)",
        file=sys.stderr,
    )
    return code


JOIN_WAIT = 20.0  # a daemon starting on a loaded machine answers within 0.3-3 s


def _running(socket: str, lock: str) -> dict | None:
    """The running daemon's ping (pid, socket), waiting out one that is
    starting; None when none runs; Unreachable for one that holds the home
    and does not answer."""
    import time

    from owl.control import locate

    deadline = time.monotonic() + JOIN_WAIT
    while True:
        try:
            answer: dict = locate.ask(socket, lambda: lock, "ping", timeout=5.0)
            return answer
        except Unreachable as e:
            if not e.starting or time.monotonic() >= deadline:
                raise
        except NoDaemon:
            return None
        time.sleep(0.05)
