"""Desktop notifications that carry buttons ("Review"), over D-Bus with jeepney.

pystray's own `notify` shows text only. The freedesktop notification spec
lets a notification carry actions; the server (dunst, GNOME Shell, KDE)
sends `ActionInvoked(id, key)` back to the connection that sent it when the
person picks one. So one connection both sends the notifications and hears
the answers: a jeepney router, whose receiver thread hands every answer for
a notification of ours to `on_action(tag, key)`.

When there is no session bus, no notification server, or one without
actions, `start()` says False and the tray falls back to plain notices.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any, Callable

log = logging.getLogger("owl.tray")

_PATH = "/org/freedesktop/Notifications"
_NAME = "org.freedesktop.Notifications"
DEFAULT = "default"  # the key a click on the notification itself sends


class Buttons:
    """Notifications with actions; see the module docstring."""

    def __init__(self, on_action: Callable[[str, str], None], app_name: str = "Owl") -> None:
        self.on_action = on_action
        self.app_name = app_name
        self._conn: Any = None
        self._router: Any = None
        self._filter: Any = None
        self._sent: dict[int, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Connect and listen; False when notifications with actions are not to be had."""
        if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            return False
        try:
            from jeepney import DBusAddress, MatchRule, new_method_call
            from jeepney.bus_messages import message_bus
            from jeepney.io.threading import DBusRouter, open_dbus_connection

            self._conn = open_dbus_connection(bus="SESSION")
            self._router = DBusRouter(self._conn)
            addr = DBusAddress(_PATH, bus_name=_NAME, interface=_NAME)
            caps = self._router.send_and_get_reply(
                new_method_call(addr, "GetCapabilities"), timeout=3
            ).body[0]
            if "actions" not in caps:
                self.close()
                return False
            rule = MatchRule(type="signal", interface=_NAME, path=_PATH)
            self._router.send_and_get_reply(message_bus.AddMatch(rule), timeout=3)
            self._filter = self._router.filter(rule, queue=queue.Queue(maxsize=64))
        except Exception as e:  # no server, a refused bus, an old jeepney
            log.info("notifications with buttons are not available: %s", e)
            self.close()
            return False
        self._addr = addr
        self._thread = threading.Thread(target=self._listen, name="owl-notify", daemon=True)
        self._thread.start()
        return True

    def notify(
        self, title: str, body: str, actions: list[tuple[str, str]], tag: str, timeout_ms: int = -1
    ) -> int | None:
        """Show a notification with `actions` [(key, label)]; returns its id, or None."""
        if self._router is None:
            return None
        from jeepney import new_method_call

        flat = [x for pair in actions for x in pair]
        msg = new_method_call(
            self._addr,
            "Notify",
            "susssasa{sv}i",
            (self.app_name, 0, "", title, body, flat, {}, timeout_ms),
        )
        try:
            nid = int(self._router.send_and_get_reply(msg, timeout=3).body[0])
        except Exception as e:
            log.info("notification not shown: %s", e)
            return None
        with self._lock:
            self._sent[nid] = tag
        return nid

    def _listen(self) -> None:
        from jeepney.low_level import HeaderFields

        while not self._stop.is_set():
            try:
                msg = self._filter.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            body = msg.body
            if member == "ActionInvoked" and len(body) == 2:
                with self._lock:
                    tag = self._sent.get(int(body[0]))
                if tag is not None:
                    try:
                        self.on_action(tag, str(body[1]))
                    except Exception:
                        log.exception("notification action failed")
            elif member == "NotificationClosed" and body:
                with self._lock:
                    self._sent.pop(int(body[0]), None)

    def close(self) -> None:
        self._stop.set()
        for closing in (self._filter, self._router, self._conn):
            if closing is None:
                continue
            try:
                closing.close()
            except Exception:
                pass
        self._filter = self._router = self._conn = None
