"""`owl` / `owl tray`: the tray icon, over the daemon of this OWL_HOME.

When no daemon runs, the tray runs one in its own process: the supervisor
on its worker thread, the input hooks on theirs, and the toolkit's loop on
the main thread (macOS requires it there); Quit then stops both. When a
daemon already runs (`owl add` started one in the background, `owl daemon`,
a systemd unit), the tray joins it over the socket as a client
(`owl.tray.remote`), and its Quit closes the tray only.

Where no tray can be shown (no display, no tray host, only pystray's
menu-less xorg backend) Owl says why in one line and goes on as the headless
daemon (or, joined to one, exits: that daemon goes on without a view).
"""

from __future__ import annotations

import sys

from owl.daemon.main import serve_until_signal, start_daemon
from owl.errors import NoDaemon


def run() -> int:
    joined = _join()
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
        print(
            f"owl: no tray: {e}; running without one (owl status shows what happens)",
            file=sys.stderr,
        )
        return serve_until_signal(d)
    d.close()
    return code


def _join() -> int | None:
    """The tray as a client of the daemon already running; None when none runs."""
    from owl.control.client import ask
    from owl.settings.paths import get_paths

    paths = get_paths()
    try:
        pid = int(ask(paths.socket, "ping", timeout=5.0)["pid"])
    except NoDaemon:
        return None
    from owl.tray.app import TrayUnavailable, run_tray
    from owl.tray.remote import RemoteDaemon

    print(
        f"owl: joining the daemon already running (pid {pid}); Quit closes the tray only "
        "(owl daemon stop stops the daemon)",
        file=sys.stderr,
    )
    try:
        code = run_tray(RemoteDaemon(paths.socket, pid))
    except TrayUnavailable as e:
        print(f"owl: no tray: {e}; the daemon (pid {pid}) goes on", file=sys.stderr)
        return 1
    print(
        f"owl: tray closed; the daemon (pid {pid}) goes on (owl daemon stop stops it)",
        file=sys.stderr,
    )
    return code
