"""A stand-in for systemd-logind's inhibitor API, on a private D-Bus bus.

There is no logind (and no system bus) on a test machine, but Owl's keep-awake
code must be tested against a real D-Bus peer that hands out a real file
descriptor, exactly as logind does. This module is both:

* a script (``python tests/support_logind.py [--refuse]``) that claims
  ``org.freedesktop.login1`` on the bus named by ``DBUS_SESSION_BUS_ADDRESS``
  and implements ``org.freedesktop.login1.Manager.Inhibit`` and
  ``ListInhibitors``. Each Inhibit hands out the write end of a pipe; a
  thread waits for EOF on the read end, which comes only once every copy of
  the write end is closed (by the client, or by the kernel when the client
  dies) - the same FIFO trick logind itself uses. It also answers
  ``Calls()`` on the interface ``owl.test.LogindStandIn``: every Inhibit
  call ever made, held or not, so a test can tell "one lock" from "two locks,
  one already gone"; ``SetRefuse(b)``, to make it start or stop refusing
  Inhibit the way a logind behind a strict polkit policy would; and
  ``SetIdle(s, t)``, the ``IdleAction`` and ``IdleActionUSec`` its properties
  then answer (``org.freedesktop.DBus.Properties.Get``).
* a test helper (:class:`StandIn`) that starts a private ``dbus-daemon`` and
  the script on it, and asks the script what it holds.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from jeepney import (
    DBusAddress,
    HeaderFields,
    MatchRule,
    new_error,
    new_method_call,
    new_method_return,
)
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import unwrap_msg

LOGIND_NAME = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
MANAGER_IFACE = "org.freedesktop.login1.Manager"
STANDIN_IFACE = "owl.test.LogindStandIn"


# --------------------------------------------------------------------------
# The service (runs in its own process)
# --------------------------------------------------------------------------


@dataclass
class _Lock:
    what: str
    who: str
    why: str
    mode: str
    uid: int
    pid: int
    held: bool = True


class _Service:
    """State of the stand-in: every lock handed out, and whether it is held."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.locks: list[_Lock] = []
        # logind's own suspend-on-idle timer, as its properties say (its defaults)
        self.idle: dict[str, str | int] = {"IdleAction": "ignore", "IdleActionUSec": 1800 * 10**6}
        self.mutex = threading.Lock()

    def watch(self, lock: _Lock, read_fd: int) -> None:
        """Mark `lock` released once the pipe's write end is gone everywhere."""

        def wait_for_eof() -> None:
            while os.read(read_fd, 4096):
                pass
            os.close(read_fd)
            with self.mutex:
                lock.held = False

        threading.Thread(target=wait_for_eof, daemon=True).start()


def _sender_creds(conn, sender: str) -> tuple[int, int]:
    """Ask the bus daemon for the caller's uid and pid, as logind does."""
    uid = unwrap_msg(conn.send_and_get_reply(message_bus.GetConnectionUnixUser(sender), timeout=5))[
        0
    ]
    pid = unwrap_msg(
        conn.send_and_get_reply(message_bus.GetConnectionUnixProcessID(sender), timeout=5)
    )[0]
    return uid, pid


def _handle(conn, service: _Service, msg):
    """Answer one method call; return the reply message."""
    fields = msg.header.fields
    iface = fields.get(HeaderFields.interface)
    member = fields.get(HeaderFields.member)
    sender = fields.get(HeaderFields.sender)

    if (iface, member) == (MANAGER_IFACE, "Inhibit"):
        what, who, why, mode = msg.body
        if service.refuse:
            return new_error(
                msg,
                "org.freedesktop.DBus.Error.AccessDenied",
                "s",
                ("Permission denied",),
            )
        uid, pid = _sender_creds(conn, sender)
        read_fd, write_fd = os.pipe()
        lock = _Lock(what, who, why, mode, uid, pid)
        with service.mutex:
            service.locks.append(lock)
        service.watch(lock, read_fd)
        reply = new_method_return(msg, "h", (write_fd,))
        conn.send(reply)
        # Our copy of the write end must go, or the pipe never reaches EOF.
        os.close(write_fd)
        return None

    if (iface, member) == (MANAGER_IFACE, "ListInhibitors"):
        with service.mutex:
            rows = [
                (lk.what, lk.who, lk.why, lk.mode, lk.uid, lk.pid)
                for lk in service.locks
                if lk.held
            ]
        return new_method_return(msg, "a(ssssuu)", (rows,))

    if (iface, member) == (STANDIN_IFACE, "Calls"):
        with service.mutex:
            rows = [(lk.what, lk.who, lk.why, lk.mode, lk.held) for lk in service.locks]
        return new_method_return(msg, "a(ssssb)", (rows,))

    if (iface, member) == ("org.freedesktop.DBus.Properties", "Get"):
        _, name = msg.body
        if name not in service.idle:
            return new_error(msg, "org.freedesktop.DBus.Error.UnknownProperty", "s", (name,))
        value = service.idle[name]
        return new_method_return(
            msg, "v", ((("s", value) if isinstance(value, str) else ("t", value)),)
        )

    if (iface, member) == (STANDIN_IFACE, "SetIdle"):
        service.idle["IdleAction"], service.idle["IdleActionUSec"] = msg.body
        return new_method_return(msg)

    if (iface, member) == (STANDIN_IFACE, "SetRefuse"):
        (service.refuse,) = msg.body
        return new_method_return(msg)

    return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"{iface}.{member}",))


def serve(refuse: bool = False) -> None:
    """Claim the logind name on the session bus and answer calls forever."""
    service = _Service(refuse)
    conn = open_dbus_connection(bus="SESSION", enable_fds=True)
    # Flag 4: fail rather than queue if the name is taken.
    reply = unwrap_msg(conn.send_and_get_reply(message_bus.RequestName(LOGIND_NAME, 4), timeout=5))
    if reply[0] != 1:  # 1 = primary owner
        sys.exit(f"could not own {LOGIND_NAME}: {reply[0]}")
    print("ready", flush=True)
    with conn.filter(MatchRule(type="method_call"), bufsize=10_000) as calls:
        while True:
            msg = conn.recv_until_filtered(calls)
            answer = _handle(conn, service, msg)
            if answer is not None:
                conn.send(answer)


# --------------------------------------------------------------------------
# The test helper (runs in the test process)
# --------------------------------------------------------------------------


class StandIn:
    """A private bus with the stand-in logind on it; a context manager.

    ``address`` is the bus address to hand to code under test (as
    ``DBUS_SESSION_BUS_ADDRESS`` with ``OWL_LOGIND_BUS=session``, or as
    ``DBUS_SYSTEM_BUS_ADDRESS`` for tools that only know the system bus).
    """

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.address = ""
        self._bus: subprocess.Popen | None = None
        self._service: subprocess.Popen | None = None

    def __enter__(self) -> "StandIn":
        self._bus = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            # It complains that it may not raise its fd limit; harmless here.
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._bus.stdout is not None
        self.address = self._bus.stdout.readline().strip()
        if not self.address:
            self.close()
            raise RuntimeError("dbus-daemon printed no address")
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address)
        argv = [sys.executable, str(Path(__file__).resolve())]
        if self.refuse:
            argv.append("--refuse")
        self._service = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        assert self._service.stdout is not None
        if self._service.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the stand-in logind did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the stand-in and its bus (only the processes started here)."""
        for proc in (self._service, self._bus):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()

    def _call(self, iface: str, member: str, signature: str | None = None, body=()):
        addr = DBusAddress(LOGIND_PATH, bus_name=LOGIND_NAME, interface=iface)
        with open_dbus_connection(bus=self.address) as conn:
            reply = unwrap_msg(
                conn.send_and_get_reply(new_method_call(addr, member, signature, body), timeout=5)
            )
        return reply[0] if reply else None

    def set_refuse(self, refuse: bool) -> None:
        """From now on, refuse (or grant) every Inhibit call."""
        self._call(STANDIN_IFACE, "SetRefuse", "b", (refuse,))

    def set_idle(self, action: str, seconds: int) -> None:
        """logind's IdleAction and IdleActionSec, as its properties will say."""
        self._call(STANDIN_IFACE, "SetIdle", "st", (action, seconds * 10**6))

    def held(self) -> list[tuple[str, str, str, str, int, int]]:
        """The locks held right now: (what, who, why, mode, uid, pid)."""
        return [tuple(row) for row in self._call(MANAGER_IFACE, "ListInhibitors")]

    def calls(self) -> list[tuple[str, str, str, str, bool]]:
        """Every Inhibit call so far: (what, who, why, mode, still_held)."""
        return [tuple(row) for row in self._call(STANDIN_IFACE, "Calls")]

    def wait_held(self, count: int, timeout: float = 2.0) -> list:
        """Wait until exactly `count` locks are held; return them.

        Raises AssertionError with what is held if that does not happen in time.
        """
        deadline = time.monotonic() + timeout
        while True:
            rows = self.held()
            if len(rows) == count:
                return rows
            if time.monotonic() >= deadline:
                raise AssertionError(f"expected {count} held locks, have {rows}")
            time.sleep(0.01)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--refuse", action="store_true", help="answer every Inhibit with AccessDenied"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(refuse=args.refuse)


if __name__ == "__main__":
    main()
