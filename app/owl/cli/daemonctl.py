"""`owl daemon stop` and `owl daemon status`: the daemon that runs in the background.

`owl add` starts a daemon in the background when none runs, so the person
needs a way to see it and to stop it that is not `kill`. Stop asks the daemon
over its socket to stop as the tray's Quit does (every Run asked to end,
killed 5 s later), then waits for the process to be gone.
"""

from __future__ import annotations

import argparse
import os
import time

from owl.cli.common import EXIT_NO_DAEMON, EXIT_OK, EXIT_REFUSED, ask, paths, print_json
from owl.errors import NoDaemon, Refused, Unreachable
from owl.rules.timefmt import moment

STOP_WAIT = 15.0  # the Runs' 5 s, the engine's own stop and a loaded machine


def status(a: argparse.Namespace) -> int:
    try:
        about = ask("daemon.status")
    except Unreachable as e:
        if a.json:
            print_json({"running": True, "answering": False, "message": str(e)})
        else:
            print(f"owl: {e}")
        return EXIT_REFUSED
    except NoDaemon:
        if a.json:
            print_json({"running": False, "home": str(paths().db.parent)})
        else:
            print(
                f"no Owl daemon is running for {paths().db.parent} (owl daemon --detach starts one)"
            )
        return EXIT_NO_DAEMON
    about["running"] = True
    if a.json:
        print_json(about)
        return EXIT_OK
    print(
        f"the daemon is running (pid {about['pid']}, since "
        f"{moment(about['started_at'], time.time())}"
        + (", with its tray" if about.get("tray") else ", no tray")
        + ")"
    )
    print(f"  home:   {about['home']}")
    if about.get("socket"):
        print(f"  socket: {about['socket']}")
    print(f"  log:    {about['log']}")
    print("  stop it with: owl daemon stop")
    return EXIT_OK


def stop(a: argparse.Namespace) -> int:
    try:
        about = ask("daemon.stop")
    except Unreachable as e:
        raise Refused(str(e)) from None
    except NoDaemon:
        said = {"running": False, "stopped": False, "message": "no Owl daemon was running"}
        print_json(said) if a.json else print(said["message"])
        return EXIT_OK
    pid = int(about["pid"])
    gone = _wait_gone(pid, STOP_WAIT)
    if not gone:
        said = {
            "pid": pid,
            "stopped": False,
            "message": f"the daemon (pid {pid}) is still stopping after {STOP_WAIT:g} s; "
            f"its log says why: {about['log']}",
        }
        print_json(said) if a.json else print(f"owl: {said['message']}")
        return EXIT_REFUSED
    said = {
        "pid": pid,
        "stopped": True,
        "message": f"the daemon (pid {pid}) stopped; its Runs were asked to end "
        "(a tray joined to it closes too)",
    }
    print_json(said) if a.json else print(said["message"])
    return EXIT_OK


def _wait_gone(pid: int, timeout: float) -> bool:
    """Whether process `pid` is gone (or a zombie) within `timeout` s."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return not os.path.exists(f"/proc/{pid}") if os.path.isdir("/proc") else False
