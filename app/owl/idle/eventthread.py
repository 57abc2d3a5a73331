"""The thread an event-driven idle backend listens on, and how it is stopped.

A backend that is told about input (Mutter's watches on D-Bus, a Wayland
idle protocol) holds a connection of its own and reads it on a thread of its
own. That thread blocks in select() on the connection's socket and on a wake
pipe, so while nothing happens nothing runs, and yet `stop` (or a changed
`idle.after`) never has to wait for the compositor's next event: a byte on
the pipe wakes the thread at once. This is that lifecycle, written once.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any, Callable

log = logging.getLogger("owl.idle")

#: How long `stop` waits for the thread to see it has been asked to end.
JOIN_TIMEOUT = 2.0


class EventThread:
    """A listening thread woken by its socket or a wake pipe; `alive`, `stop`.

    A subclass names its thread, calls `_start_thread` from `start`, loops
    `while not self._stopping` around `_wait(fd)`, and ends with `_ended(why)`.
    `_stopping` says the end was asked for; `_dead` says why it ended unasked.
    """

    thread_name = "owl-idle-events"
    #: How the log names it when it ends unasked.
    what = "idle events"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._stopping = False
        self._dead: str | None = None

    @property
    def alive(self) -> bool:
        """True while the thread runs and has not lost its source of events."""
        thread = self._thread
        return thread is not None and thread.is_alive() and self._dead is None

    def stop(self) -> None:
        """Stop listening. Safe to call twice, from the thread itself, or after it died."""
        self._stopping = True
        thread, self._thread = self._thread, None
        self._poke()
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT)
        if thread is None or not thread.is_alive():
            self._stopped()
        self._close_pipe()

    def _stopped(self) -> None:
        """Let go of what the thread used, once it has ended (or never ran)."""

    def _start_thread(self, target: Callable[..., None], *args: Any) -> None:
        """A fresh wake pipe, then the thread, named for the backend."""
        self._close_pipe()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(
            target=target, args=args, name=self.thread_name, daemon=True
        )
        self._thread.start()

    def _poke(self) -> None:
        """Wake the thread (to stop, or to see a changed setting); a no-op when none runs."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    def _wait(self, fd: Any) -> bool:
        """Block until `fd` can be read or the thread is poked; True if `fd` can."""
        ready, _, _ = select.select([fd, self._wake_r], [], [])
        if self._wake_r in ready:
            os.read(self._wake_r, 64)
        return fd in ready

    def _ended(self, why: str, on_dead: Callable[[str], None] | None) -> None:
        """The thread's last word: unless it was asked to stop, it died, and says why."""
        if not self._stopping:
            self._dead = why
            log.info("%s ended: %s", self.what, why)
            if on_dead is not None:
                on_dead(why)

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
