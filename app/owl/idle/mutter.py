"""GNOME's idle time over the session D-Bus (`org.gnome.Mutter.IdleMonitor`).

The one reader that works on GNOME Wayland, where neither pynput nor
XScreenSaver sees input. jeepney's blocking connection: no thread, no loop; a
call costs one round trip and is made only when the engine asks.
"""

from __future__ import annotations

import threading

from .base import BackendError, one_line

BUS_NAME = "org.gnome.Mutter.IdleMonitor"
OBJECT_PATH = "/org/gnome/Mutter/IdleMonitor/Core"
INTERFACE = "org.gnome.Mutter.IdleMonitor"


class MutterReader:
    name = "mutter"

    def __init__(self, bus: str = "SESSION", timeout: float = 1.0) -> None:
        self.bus = bus  # "SESSION" or a D-Bus address
        self.timeout = timeout  # a hung compositor must not hang the engine
        self._conn = None
        self._lock = threading.Lock()

    def open(self) -> None:
        from jeepney.io.blocking import open_dbus_connection

        self.close()
        try:
            self._conn = open_dbus_connection(bus=self.bus)
        except Exception as exc:
            raise BackendError(f"no session D-Bus: {one_line(exc)}") from None
        try:
            self.idle_seconds()
        except BackendError:
            self.close()
            raise

    def idle_seconds(self) -> float:
        from jeepney import DBusAddress, MessageType, new_method_call
        from jeepney.low_level import HeaderFields

        with self._lock:
            if self._conn is None:
                raise BackendError("session D-Bus is not open")
            address = DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=INTERFACE)
            try:
                reply = self._conn.send_and_get_reply(
                    new_method_call(address, "GetIdletime"), timeout=self.timeout
                )
            except TimeoutError:
                raise BackendError("GNOME's idle monitor did not answer") from None
            except Exception:
                self._drop()
                raise BackendError("session D-Bus went away") from None
            if reply.header.message_type is MessageType.error:
                name = reply.header.fields.get(HeaderFields.error_name, "an error")
                raise BackendError(f"GNOME's idle monitor is not there ({name})")
            try:
                return int(reply.body[0]) / 1000.0
            except (IndexError, TypeError, ValueError):
                raise BackendError(f"GNOME's idle monitor sent {reply.body!r}") from None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
