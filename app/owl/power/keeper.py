"""Keeping the machine awake, with the sleep inhibitor's calls off the engine thread.

Why a thread: taking or letting go of an inhibitor is a D-Bus round trip to
logind (or starting `systemd-inhibit`), which a busy or absent bus can make
last seconds. The engine only says what it wants after each pass (hold or
not, and whether power.keep_awake is on); this thread carries out the
latest wish, and skips the ones overtaken while it was busy.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("owl.awake")


class AwakeKeeper:
    """Owns the engine's inhibitor: `want()` from the engine, the calls here."""

    def __init__(self, owner: Any, why: str) -> None:
        self._owner = owner  # has .inhibitor (read by views, replaced here)
        self._why = why
        self._cond = threading.Condition()
        self._wish: tuple[bool, bool] | None = None  # (hold, keep_awake)
        self._done: tuple[bool, bool] | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="owl-awake", daemon=True)
        self._thread.start()

    def want(self, hold: bool, keep_awake: bool) -> None:
        """The engine's wish after a pass; cheap, never waits."""
        with self._cond:
            if self._wish != (hold, keep_awake):
                self._wish = (hold, keep_awake)
                self._cond.notify()

    def settled(self, timeout: float = 5.0) -> bool:
        """Wait until the latest wish is carried out (tests, shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._done == self._wish, timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Let go of the inhibitor and end the thread."""
        self.want(False, False)
        self.settled(timeout)
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)

    def _loop(self) -> None:
        retry: float | None = None  # a hold that failed is asked for again after this
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or self._wish != self._done, retry)
                if self._stop:
                    return
                wish = self._wish
            try:
                self._apply(*wish)  # type: ignore[misc]
            except Exception:  # pragma: no cover - a backend's bug must not end the thread
                log.exception("keeping the machine awake failed")
            with self._cond:
                self._done = wish
                self._cond.notify_all()
            retry = self._retry_in(wish)

    def _retry_in(self, wish: tuple[bool, bool] | None) -> float | None:
        """When to carry out a standing wish again: a hold wanted and not taken
        (a bus slow to answer at the daemon's start, a logind that refused)
        is asked for once the backend's back-off has passed, though the wish
        itself does not change while a Run works or a Job waits."""
        inh = self._owner.inhibitor
        if wish != (True, True) or inh is None or inh.backend == "none" or inh.held:
            return None
        return max(inh.retry_after, 0.1)

    def _apply(self, hold: bool, keep_awake: bool) -> None:
        inh = self._owner.inhibitor
        if inh is None:
            return
        if not keep_awake:
            inh.release()
            return
        if inh.backend == "none" and inh.problem is None:
            # Built while power.keep_awake was false; it was turned on since.
            from owl.power import make_inhibitor

            inh.close()
            inh = self._owner.inhibitor = make_inhibitor(True)
        if hold:
            inh.hold(self._why)
        else:
            inh.release()
