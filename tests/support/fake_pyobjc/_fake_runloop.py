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
