"""The shared state of the stand-in PyObjC: a main-thread queue and a call log."""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable

MAIN: "queue.Queue[Callable[[], None]]" = queue.Queue()
_log_lock = threading.Lock()


def note(*words: Any) -> None:
    """One line in $FAKE_PYOBJC_LOG (what a test reads back)."""
    path = os.environ.get("FAKE_PYOBJC_LOG")
    if not path:
        return
    with _log_lock, open(path, "a", encoding="utf-8") as f:
        f.write(" ".join(str(w) for w in words) + "\n")


def on_main(what: str) -> None:
    """AppKit's UI objects belong to the main thread: recent macOS crashes
    ("Setting NSStatusItem property on background thread") where older ones
    logged. The stand-ins raise, and say so in the log for the test."""
    here = threading.current_thread()
    if here is not threading.main_thread():
        note("OFF MAIN THREAD", what, "on", here.name)
        raise AssertionError(f"{what} called on thread {here.name!r}, not the main thread")


class Anything:
    """Answers any attribute or call with another Anything."""

    def __init__(self, name: str = "obj") -> None:
        self._name = name

    def __getattr__(self, name: str) -> "Anything":
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "Anything":
        return Anything(f"{self._name}()")


class MainOnly(Anything):
    """Like Anything, but every call must come from the main thread (the
    status item, its button, menus and their items); the setters a test looks
    for are written to the log."""

    NOTED = ("setHidden_", "setImage_", "setToolTip_", "setMenu_", "setActivationPolicy_")

    def __getattr__(self, name: str) -> "MainOnly":
        if name.startswith("__"):
            raise AttributeError(name)
        return MainOnly(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "MainOnly":
        on_main(self._name)
        last = self._name.rsplit(".", 1)[-1]
        if last in self.NOTED:
            note(
                last,
                *[
                    a if isinstance(a, (str, int, bool)) or a is None else type(a).__name__
                    for a in args
                ],
            )
        return MainOnly(f"{self._name}()")
