"""Is the screen locked? The desktop's word on it, heard as D-Bus signals.

Two places say it, and both are listened to, each on a connection and a
thread of its own (`EventThread`): nothing is polled, and nothing here runs on
the engine's thread.

- The session bus: a screensaver that owns `org.freedesktop.ScreenSaver`
  (KDE, Xfce, Cinnamon, MATE, light-locker) or `org.gnome.ScreenSaver` (GNOME
  Shell) emits `ActiveChanged(b)`; `GetActive` is asked once at start, and
  again whenever one of those names gets a new owner.
- logind's session (`org.freedesktop.login1.Session` on the system bus, or the
  bus `OWL_LOGIND_BUS` names, as `owl.power.logind` reads it): its
  `LockedHint` property, read at start and followed through
  `PropertiesChanged`. GNOME, KDE and others set it when they lock.

The screen counts as locked while either says so. Only the owner of the name is
believed: any program on the bus may emit a signal with a screensaver's
interface (an agent's, say, to be thawed sooner), but not from the connection
that owns the name, which the bus daemon vouches for. A source that cannot be
reached (no session bus, no logind) is simply not heard; with none heard the
lock is unknown (None) and presence is input alone. A change is told through
`on_change` (from the listening thread), which only wakes the engine: it reads
`locked` on its next pass, like any other reading (`owl.idle.machine.LockedMachine`).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable

from . import dbuscall
from .base import BackendError, one_line
from .eventthread import EventThread

AUTH_TIMEOUT = 1.0

#: The screensaver names on the session bus, and the object each answers on.
SCREENSAVERS = {
    "org.freedesktop.ScreenSaver": "/org/freedesktop/ScreenSaver",
    "org.gnome.ScreenSaver": "/org/gnome/ScreenSaver",
}
LOGIND = "org.freedesktop.login1"
SESSION_IFACE = "org.freedesktop.login1.Session"
PROPS_IFACE = "org.freedesktop.DBus.Properties"


class _Source(EventThread):
    """One bus's word on the lock: None until it has said anything."""

    name = "lock"
    what = "screen lock"

    def __init__(self, bus: str) -> None:
        super().__init__()
        self.bus = bus
        self.locked: bool | None = None
        self._on_change: Callable[[], None] = lambda: None
        self._owners: dict[str, str] = {}  # a well-known name -> its owner's unique name

    def start(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._stopping, self._dead = False, None
        self._start_thread(self._run)

    def _set(self, locked: bool | None) -> None:
        if locked != self.locked:
            self.locked = locked
            self._on_change()

    def _run(self) -> None:
        why = f"{self.what} went away"
        conn = None
        try:
            from jeepney.io.blocking import open_dbus_connection

            try:
                conn = open_dbus_connection(bus=self.bus, auth_timeout=AUTH_TIMEOUT)
            except Exception as exc:
                raise BackendError(f"no D-Bus {self.bus.lower()} bus: {one_line(exc)}") from None
            signals: deque = deque()
            self._subscribe(conn, signals)
            while not self._stopping:
                while signals:
                    self._signal(conn, signals.popleft())
                if self._wait(conn.sock):
                    dbuscall.drain(conn)
        except BackendError as exc:
            why = str(exc)
        except Exception as exc:  # the bus closed under us, or an answer made no sense
            why = f"{self.what} went away ({type(exc).__name__}: {one_line(exc)})"
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass
        self._set(None)  # gone: it says nothing any more (the log says why)
        self._ended(why, None)

    def _subscribe(self, conn: Any, signals: deque) -> None:
        raise NotImplementedError

    def _signal(self, conn: Any, msg: Any) -> None:
        raise NotImplementedError

    def _own(self, conn: Any, name: str) -> bool:
        """Learn who owns `name` now; False when nobody does."""
        try:
            self._owners[name] = str(
                dbuscall.call(conn, *dbuscall.BUS, "GetNameOwner", "s", (name,))[0]
            )
            return True
        except BackendError:  # NameHasNoOwner
            self._owners.pop(name, None)
            return False

    def _from_owner(self, msg: Any, name: str) -> bool:
        from jeepney.low_level import HeaderFields

        owner = self._owners.get(name)
        return owner is not None and msg.header.fields.get(HeaderFields.sender) == owner


class ScreenSaverSource(_Source):
    """`ActiveChanged` from the session bus's screensavers (either name)."""

    name = "screensaver"
    thread_name = "owl-screensaver"
    what = "the screensaver watch"

    def __init__(self, bus: str = "SESSION") -> None:
        super().__init__(bus)
        self._active: dict[str, bool] = {}  # screensaver name -> active

    def _subscribe(self, conn: Any, signals: deque) -> None:
        from jeepney import MatchRule

        for name in SCREENSAVERS:
            rules = [
                MatchRule(type="signal", interface=name, member="ActiveChanged"),
                dbuscall.owner_rule(name),
            ]
            for rule in rules:
                conn.filter(rule, queue=signals)  # kept for the connection's life
                dbuscall.add_match(conn, rule)
        for name in SCREENSAVERS:
            self._ask(conn, name)

    def _ask(self, conn: Any, name: str) -> None:
        """GetActive from `name`, if someone owns it (an error: that one cannot say).
        Asked only of a name that is owned: a call would start an activatable one."""
        try:
            if not self._own(conn, name):
                raise BackendError(f"nobody owns {name}")
            (active,) = dbuscall.call(
                conn, self._owners[name], SCREENSAVERS[name], name, "GetActive"
            )
        except BackendError:
            self._active.pop(name, None)
        else:
            self._active[name] = bool(active)
        self._settle()

    def _settle(self) -> None:
        self._set(any(self._active.values()) if self._active else None)

    def _signal(self, conn: Any, msg: Any) -> None:
        from jeepney.low_level import HeaderFields

        fields = msg.header.fields
        if fields.get(HeaderFields.member) == "NameOwnerChanged":
            name, _, new = msg.body
            if name in SCREENSAVERS:
                if new:
                    self._ask(conn, name)
                else:
                    self._owners.pop(name, None)
                    self._active.pop(name, None)
                    self._settle()
            return
        iface = fields.get(HeaderFields.interface)
        if iface in SCREENSAVERS and msg.body and self._from_owner(msg, iface):
            self._active[iface] = bool(msg.body[0])
            self._settle()


class LogindSource(_Source):
    """logind's `LockedHint` of this session, followed through PropertiesChanged."""

    name = "logind"
    thread_name = "owl-logind-lock"
    what = "logind's lock watch"

    def __init__(self, bus: str | None = None, session: str | None = None) -> None:
        """`session`: logind's id for it (XDG_SESSION_ID), else "auto": the caller's
        session, or the user's graphical one when the daemon is in none."""
        from owl.power.logind import bus_name  # OWL_LOGIND_BUS, as the inhibitor reads it

        super().__init__(bus or bus_name())
        self.session = session or os.environ.get("XDG_SESSION_ID") or "auto"
        self._path: str | None = None

    def _subscribe(self, conn: Any, signals: deque) -> None:
        from jeepney import MatchRule

        if not self._own(conn, LOGIND):
            raise BackendError(f"no logind on the D-Bus {self.bus.lower()} bus")
        (path,) = dbuscall.call(
            conn, LOGIND, "/org/freedesktop/login1", LOGIND + ".Manager", "GetSession",
            "s", (self.session,),
        )  # fmt: skip
        self._path = str(path)
        rule = MatchRule(
            type="signal", interface=PROPS_IFACE, member="PropertiesChanged", path=self._path
        )
        rule.add_arg_condition(0, SESSION_IFACE)
        for r in (rule, dbuscall.owner_rule(LOGIND)):
            conn.filter(r, queue=signals)
            dbuscall.add_match(conn, r)
        self._read(conn)

    def _read(self, conn: Any) -> None:
        assert self._path is not None
        (value,) = dbuscall.call(
            conn, LOGIND, self._path, PROPS_IFACE, "Get", "ss", (SESSION_IFACE, "LockedHint")
        )
        self._set(bool(value[1]))  # a variant: (signature, value)

    def _signal(self, conn: Any, msg: Any) -> None:
        from jeepney.low_level import HeaderFields

        if msg.header.fields.get(HeaderFields.member) == "NameOwnerChanged":
            if msg.body[2]:  # logind restarted: its word again, from the new owner
                self._owners[LOGIND] = msg.body[2]
                self._read(conn)
            else:
                raise BackendError("logind left the bus")
            return
        if not self._from_owner(msg, LOGIND):
            return
        _, changed, invalidated = msg.body
        if "LockedHint" in changed:
            self._set(bool(changed["LockedHint"][1]))
        elif "LockedHint" in invalidated:
            self._read(conn)


class ScreenLock:
    """The screen's lock, from every source that answers: locked while any says so.

    `on_change` is called from a listening thread each time the answer
    changes; `locked` is None while no source has said anything.
    """

    def __init__(self, sources: list[_Source] | None = None) -> None:
        self.sources = sources if sources is not None else [ScreenSaverSource(), LogindSource()]
        self._lock = threading.Lock()
        self._locked: bool | None = None
        self._on_change: Callable[[], None] | None = None

    def start(self, on_change: Callable[[], None] | None = None) -> None:
        self._on_change = on_change
        for s in self.sources:
            s.start(self._changed)

    def stop(self) -> None:
        for s in self.sources:
            s.stop()

    def _changed(self) -> None:
        said = [s.locked for s in self.sources if s.locked is not None]
        locked = any(said) if said else None
        with self._lock:
            if locked == self._locked:
                return
            self._locked = locked
        cb = self._on_change
        if cb is not None:
            cb()

    @property
    def locked(self) -> bool | None:
        with self._lock:
            return self._locked

    @property
    def heard(self) -> list[str]:
        """The sources that say anything now (for `owl status`)."""
        return [s.name for s in self.sources if s.locked is not None]
