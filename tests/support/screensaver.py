"""The desktop's word on the screen lock, served on a private session bus.

No screensaver and no logind run on a test machine, but Owl must hear the lock
through a real bus from a real peer. This module is both:

* a script (``python tests/support/screensaver.py [--as NAME]``) that owns a
  name on the bus in ``DBUS_SESSION_BUS_ADDRESS`` and serves the desktop's
  interface for it: ``org.freedesktop.ScreenSaver`` or ``org.gnome.ScreenSaver``
  (``GetActive``; the ``ActiveChanged(b)`` signal), or ``logind``
  (``org.freedesktop.login1``: ``Manager.GetSession`` and the session's
  ``LockedHint`` through ``org.freedesktop.DBus.Properties``, with
  ``PropertiesChanged``). A line ``lock`` or ``unlock`` on its stdin changes
  the state and emits the signal; it answers ``ok`` once the signal is sent.
* a test helper (:class:`Desktop`) that starts a private ``dbus-daemon`` and
  the script on it.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

SESSION_PATH = "/org/freedesktop/login1/session/_31"
SAVERS = {
    "org.freedesktop.ScreenSaver": "/org/freedesktop/ScreenSaver",
    "org.gnome.ScreenSaver": "/org/gnome/ScreenSaver",
}
PROPS = "org.freedesktop.DBus.Properties"
SESSION = "org.freedesktop.login1.Session"


# ------------------------------------------------------------- the service


def _answer(msg: Any, name: str, state: dict) -> Any:
    from jeepney import HeaderFields, new_error, new_method_return

    f = msg.header.fields
    call = (f.get(HeaderFields.interface), f.get(HeaderFields.member))
    if name in SAVERS and call == (name, "GetActive"):
        return new_method_return(msg, "b", (state["locked"],))
    if name == "logind" and call == ("org.freedesktop.login1.Manager", "GetSession"):
        return new_method_return(msg, "o", (SESSION_PATH,))
    if name == "logind" and call == (PROPS, "Get") and tuple(msg.body) == (SESSION, "LockedHint"):
        return new_method_return(msg, "v", (("b", state["locked"]),))
    return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", (repr(call),))


def _changed(name: str, locked: bool) -> Any:
    from jeepney import DBusAddress, new_signal

    if name in SAVERS:
        return new_signal(
            DBusAddress(SAVERS[name], interface=name), "ActiveChanged", "b", (locked,)
        )
    return new_signal(
        DBusAddress(SESSION_PATH, interface=PROPS),
        "PropertiesChanged",
        "sa{sv}as",
        (SESSION, {"LockedHint": ("b", locked)}, []),
    )


def _ping() -> Any:
    from jeepney import DBusAddress, new_method_call

    bus = DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus.Peer")
    return new_method_call(bus, "Ping")


def serve(name: str) -> None:
    from jeepney import MatchRule
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.wrappers import unwrap_msg

    conn = open_dbus_connection(bus="SESSION")
    owned = "org.freedesktop.login1" if name == "logind" else name
    if unwrap_msg(conn.send_and_get_reply(message_bus.RequestName(owned, 4), timeout=5))[0] != 1:
        sys.exit(f"could not own {owned}")
    state = {"locked": False}
    print("ready", flush=True)
    with conn.filter(MatchRule(type="method_call"), bufsize=1000) as calls:
        while True:
            while calls:
                conn.send(_answer(calls.popleft(), name, state))
            ready, _, _ = select.select([conn.sock, sys.stdin], [], [])
            if sys.stdin in ready:
                word = sys.stdin.readline().strip()
                if not word:
                    return
                state["locked"] = word == "lock"
                conn.send(_changed(name, state["locked"]))
                print("ok", flush=True)
            if conn.sock in ready:
                try:
                    conn.recv_messages(timeout=0)
                except TimeoutError:
                    pass


# ------------------------------------------------------------- the helper


class Desktop:
    """A private session bus with stand-in screensavers (or logind) on it: the
    first name given is the one `lock` speaks for unless told another."""

    def __init__(self, *names: str) -> None:
        self.names = names or ("org.freedesktop.ScreenSaver",)
        self.address = ""
        self._procs: list[subprocess.Popen] = []
        self._services: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> "Desktop":
        bus = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._procs.append(bus)
        assert bus.stdout is not None
        self.address = bus.stdout.readline().strip()
        if not self.address:
            self.close()
            raise RuntimeError("dbus-daemon printed no address")
        for name in self.names:
            service = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--as", name],
                env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._procs.insert(0, service)
            self._services[name] = service
            if _line(service) != "ready":
                self.close()
                raise RuntimeError(f"the stand-in {name} did not start")
        return self

    def lock(self, locked: bool = True, name: str | None = None) -> None:
        """Lock (or unlock) the screen: the signal is on the bus when this returns."""
        service = self._services[name or self.names[0]]
        assert service.stdin is not None
        service.stdin.write("lock\n" if locked else "unlock\n")
        service.stdin.flush()
        assert _line(service) == "ok"

    def spoof(self, name: str, locked: bool) -> None:
        """Emit `name`'s ActiveChanged from a connection that does not own it,
        as any program on the bus may (it is on the bus when this returns)."""
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus=self.address) as conn:
            conn.send(_changed(name, locked))
            conn.send_and_get_reply(_ping(), timeout=5)  # the bus has read what came before

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the service and its bus (only the processes started here)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


def _line(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="name", default="org.freedesktop.ScreenSaver")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args.name)


if __name__ == "__main__":
    main()
