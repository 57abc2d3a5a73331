"""X11 idle time from the MIT-SCREEN-SAVER extension (what xprintidle reads).

Uses python-xlib (already a dependency of pynput) rather than libX11 through
ctypes: libX11's default I/O error handler calls exit() when the X server goes
away, while python-xlib raises an exception we can turn into a fallback.
"""

from __future__ import annotations

import threading

from .base import BackendError, one_line


class XScreenSaverReader:
    name = "xscreensaver"

    def __init__(self, display: str) -> None:
        self.display = display
        self._conn = None
        self._root = None
        self._lock = threading.Lock()  # one X connection, possibly several asking threads

    def open(self) -> None:
        from Xlib import display as xdisplay

        self.close()
        try:
            conn = xdisplay.Display(self.display)
        except Exception as exc:
            raise BackendError(f"cannot open X display {self.display}: {one_line(exc)}") from None
        if not conn.has_extension("MIT-SCREEN-SAVER"):
            conn.close()
            raise BackendError(f"X display {self.display} has no MIT-SCREEN-SAVER extension")
        self._conn, self._root = conn, conn.screen().root
        self.idle_seconds()  # probe once, so a broken server fails here, not later

    def idle_seconds(self) -> float:
        with self._lock:
            if self._root is None:
                raise BackendError(f"X display {self.display} is not open")
            try:
                info = self._root.screensaver_query_info()
            except Exception:
                # ConnectionClosedError, BrokenPipeError, an X error: the server is gone or broken.
                self._drop()
                raise BackendError(f"X server {self.display} went away") from None
            return info.idle / 1000.0

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn, self._root = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass  # a dead connection may fail to close; it is dropped either way
