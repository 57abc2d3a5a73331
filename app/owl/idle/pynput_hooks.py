"""Input as events, from pynput's keyboard and mouse listeners (X11, macOS, Windows).

pynput is imported only in `start`: importing it with no reachable X display
raises ImportError, and nothing on the CLI's path may pay for it.

Two of pynput's own names are used here, `_condition` and `_ready`: the
readiness its public `wait()` waits on. That `wait()` takes no timeout and never
returns for a listener whose thread died before it was ready (no X display, a
refused grab), so the daemon's start would hang in it. Waiting on the same
condition with a deadline, and marking a dead listener ready, is the only way
to keep both promises. pynput 1.8 has these two names, and the
hooks' tests under Xvfb (a dying X server included) would fail if they went.

pynput's listener threads are wrapped so that their end is noticed: when the X
server goes away a listener's thread dies with an exception (printed to
stderr by default); here it becomes one log line and an `on_dead` call.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from .base import BackendError, one_line

log = logging.getLogger("owl.idle")

READY_TIMEOUT = 5.0


def _watched(listener_cls: type, on_end: Callable[[Any, BaseException | None], None]) -> type:
    """A subclass of a pynput Listener whose thread reports how it ended."""

    class Watched(listener_cls):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            error: BaseException | None = None
            try:
                super().run()
            except BaseException as exc:  # the thread is ending anyway; say why, once
                error = exc
            finally:
                # pynput's wait() would block forever on a listener that died
                # early: mark it ready (see the module's docstring).
                with self._condition:
                    self._ready = True
                    self._condition.notify_all()
                on_end(self, error)

    return Watched


def _unblock_x11(listener: Any) -> None:
    """End an X11 listener's RECORD loop now rather than at the next input event.

    pynput's stop() queues the disable request on the recording connection,
    whose thread is blocked reading; with two listeners it stays unsent until
    input arrives. Sending it on the listener's other connection (as pynput's
    own cleanup does) ends the recording at once.
    """
    display, context = getattr(listener, "_display_stop", None), getattr(listener, "_context", None)
    if display is None or context is None:
        return  # not X11, or never got that far
    try:
        display.record_disable_context(context)
        display.flush()
    except Exception:
        pass  # server gone or context already freed: the loop has ended anyway


class PynputHooks:
    """Keyboard + mouse listeners; every key, click, scroll and move is an event."""

    def __init__(self, platform: str) -> None:
        self.name = f"pynput-{platform}"  # "pynput-x11", "pynput-darwin", "pynput-win32"
        # On macOS pynput listens through an event tap: deaf to keys under Secure Input.
        self.may_miss_input = platform == "darwin"
        self._listeners: list[Any] = []
        self._stopping = False
        self._dead: str | None = None
        self._on_dead: Callable[[str], None] | None = None

    def start(self, on_event: Callable[..., None], on_dead: Callable[[str], None]) -> None:
        try:
            from pynput import keyboard, mouse
        except Exception as exc:  # ImportError (no display), Xlib errors, missing frameworks
            raise BackendError(f"pynput cannot start: {one_line(exc)}") from None

        self.stop()
        self._stopping, self._dead, self._on_dead = False, None, on_dead
        listeners = [
            _watched(mouse.Listener, self._ended)(
                on_move=on_event, on_click=on_event, on_scroll=on_event
            ),
            _watched(keyboard.Listener, self._ended)(on_press=on_event, on_release=on_event),
        ]
        self._listeners = listeners
        for listener in listeners:
            listener.start()
        # pynput's wait() with a deadline (see the module's docstring).
        deadline = time.monotonic() + READY_TIMEOUT
        for listener in listeners:
            with listener._condition:
                while not listener._ready and time.monotonic() < deadline:
                    listener._condition.wait(0.1)
        if self._dead or not all(l.is_alive() for l in listeners):
            why = self._dead or "listeners did not start"
            self.stop()
            raise BackendError(f"pynput cannot start: {why}")
        if getattr(listeners[1], "IS_TRUSTED", True) is False:
            # macOS: pynput's listeners check Accessibility; untrusted, they see nothing.
            from owl.bundle import grantee

            self.stop()
            raise BackendError(
                f"pynput may not watch input: grant Accessibility to {grantee()} "
                "(System Settings › Privacy & Security › Accessibility)"
            )

    @property
    def alive(self) -> bool:
        return (
            bool(self._listeners)
            and self._dead is None
            and all(l.is_alive() for l in self._listeners)
        )

    def stop(self) -> None:
        self._stopping = True
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener.stop()
            except Exception:
                pass  # its display may already be gone; the thread ends either way
            _unblock_x11(listener)
        for listener in listeners:
            if listener is not threading.current_thread():
                # Thread.join, not pynput's join, which re-raises the thread's error.
                threading.Thread.join(listener, 1.0)

    def _ended(self, listener: Any, error: BaseException | None) -> None:
        if self._stopping or listener not in self._listeners:
            return
        if self.name == "pynput-x11":
            why = "X server went away"  # the only way an X11 listener ends unasked
        else:
            why = "listener stopped" + (f": {one_line(error)}" if error else "")
        if self._dead is None:
            self._dead = why
            if self._on_dead is not None:
                self._on_dead(why)
