"""GNOME's idle monitor as events: Mutter's watches, on a D-Bus connection of their own.

Mutter says when things happen rather than being asked about once a second:

- `AddIdleWatch(ms)` fires `WatchFired(id)` each time input has stopped for
  that long: the engine is woken (`on_quiet`) to start or thaw work on time;
- `AddUserActiveWatch()` fires once on the next input, about 1 ms after it:
  that is the hook event that freezes a Run. It is one-shot, so it is armed
  again each time the idle watch fires, i.e. whenever the machine is idle,
  and when `idle.after` is edited (the engine may start a Run at once on
  its own GetIdletime read, before the new idle watch fires).

The connection lives on a thread of its own, blocked in select() on the bus
socket and a wake pipe (for a changed `idle.after`, and for stop): while
nothing happens, nothing runs. How long it has been quiet is still read with
`MutterReader` (GetIdletime) when the engine asks, on the engine's connection.
Mutter leaving the bus, or the bus closing, ends the hooks (`on_dead`).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from . import dbuscall
from .base import BackendError, one_line
from .eventthread import EventThread
from .mutter import BUS_NAME, INTERFACE, OBJECT_PATH


class MutterWatch(EventThread):
    """Hooks for GNOME: input and quiet as Mutter's IdleMonitor watches."""

    name = "mutter-watch"
    thread_name = "owl-mutter-watch"
    what = "mutter watch"

    def __init__(self, bus: str = "SESSION") -> None:
        super().__init__()
        self.bus = bus
        self._after_ms = 600_000
        self._on_quiet: Callable[[], None] | None = None
        self._conn: Any = None

    # ---------------------------------------------------------------- hooks

    def watch_quiet(self, after: float, on_quiet: Callable[[], None]) -> None:
        """Call `on_quiet` each time input has stopped for `after` seconds."""
        self._on_quiet = on_quiet
        after_ms = max(1, int(round(after * 1000)))
        if after_ms != self._after_ms:
            self._after_ms = after_ms
            self._poke()

    def start(self, on_event: Callable[..., None], on_dead: Callable[[str], None]) -> None:
        from jeepney.io.blocking import open_dbus_connection

        self.stop()
        try:
            conn = open_dbus_connection(bus=self.bus)
        except Exception as exc:
            raise BackendError(f"no session D-Bus: {one_line(exc)}") from None
        signals: deque = deque()
        try:
            for rule in (_rule(), dbuscall.owner_rule(BUS_NAME)):
                conn.filter(rule, queue=signals)  # kept for the connection's life
                dbuscall.add_match(conn, rule)
            idle_id = _call(conn, "AddIdleWatch", "t", (self._after_ms,))[0]
            active_id = _call(conn, "AddUserActiveWatch")[0]
        except BackendError:
            conn.close()
            raise
        self._conn, self._stopping, self._dead = conn, False, None
        self._start_thread(self._run, conn, signals, idle_id, active_id, on_event, on_dead)

    # --------------------------------------------------------------- thread

    def _run(
        self,
        conn: Any,
        signals: deque,
        idle_id: int,
        active_id: int,
        on_event: Callable[..., None],
        on_dead: Callable[[str], None],
    ) -> None:
        from jeepney.low_level import HeaderFields

        after_ms = self._after_ms
        why = "GNOME's idle monitor went away"
        try:
            while not self._stopping:
                while signals:
                    msg = signals.popleft()
                    if msg.header.fields.get(HeaderFields.member) == "NameOwnerChanged":
                        if msg.body[0] == BUS_NAME and not msg.body[2]:
                            raise BackendError("GNOME's idle monitor left the session bus")
                        continue
                    fired = msg.body[0]
                    if fired == active_id:
                        active_id = -1
                        on_event()
                    elif fired == idle_id:
                        # Idle now: the next input must be seen the moment it comes
                        # (the watch armed at start may still be waiting for it).
                        active_id = _arm_active(conn, active_id, after_ms, on_event)
                        if self._on_quiet is not None:
                            self._on_quiet()
                if after_ms != self._after_ms:  # idle.after was edited
                    after_ms = self._after_ms
                    _call(conn, "RemoveWatch", "u", (idle_id,))
                    idle_id = _call(conn, "AddIdleWatch", "t", (after_ms,))[0]
                    # The engine reads GetIdletime for itself and may start a Run
                    # on the new value before the new watch fires: input from
                    # now on must freeze it, so the active watch is armed now too.
                    active_id = _arm_active(conn, active_id, after_ms, on_event)
                if signals:
                    continue
                if self._wait(conn.sock):
                    dbuscall.drain(conn)
        except BackendError as exc:
            why = str(exc)
        except Exception as exc:  # the bus closed under us, or an answer made no sense
            why = f"GNOME's idle monitor went away ({type(exc).__name__})"
        finally:
            try:
                conn.close()
            except Exception:
                pass
        self._ended(why, on_dead)


def _arm_active(conn: Any, active_id: int, after_ms: int, on_event: Callable[..., None]) -> int:
    """Arm the one-shot input watch if it is not armed; its id.

    Input that came before the watch was armed is not reported by it, so
    idle time under `after_ms` (input within `idle.after`: the machine is in
    use) is said as an input at once.
    """
    if active_id >= 0:
        return active_id
    active_id = _call(conn, "AddUserActiveWatch")[0]
    if _call(conn, "GetIdletime")[0] < after_ms:
        on_event()
    return active_id


def _call(conn: Any, method: str, signature: str | None = None, body: tuple = ()) -> tuple:
    """One call on GNOME's idle monitor."""
    return dbuscall.call(
        conn, BUS_NAME, OBJECT_PATH, INTERFACE, method, signature, body,
        who="GNOME's idle monitor",
    )  # fmt: skip


def _rule() -> Any:
    from jeepney import MatchRule

    return MatchRule(type="signal", interface=INTERFACE, member="WatchFired", path=OBJECT_PATH)
