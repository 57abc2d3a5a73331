"""`owl` / `owl tray`: the daemon and its tray icon in one process.

The supervisor runs on its worker thread, the input hooks on theirs, and the
toolkit's loop on the main thread (macOS requires it there). Where no tray can
be shown (no display, no tray host, only pystray's menu-less xorg backend) Owl
says why in one line and goes on as the headless daemon.
"""

from __future__ import annotations

import sys

from owl.daemon import serve_until_signal, start_daemon


def run() -> int:
    d = start_daemon()
    if d is None:
        return 1
    try:
        from owl.tray.app import TrayUnavailable, run_tray
    except Exception as e:  # pragma: no cover - a broken toolkit install
        print(f"owl: no tray ({e}); running without one", file=sys.stderr)
        return serve_until_signal(d)
    try:
        code = run_tray(d)
    except TrayUnavailable as e:
        print(f"owl: no tray: {e}; running without one (owl status shows what happens)",
              file=sys.stderr)
        return serve_until_signal(d)
    d.close()
    return code
