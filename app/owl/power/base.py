"""The one interface every keep-awake backend shares, and the no-op backend.

Keeping the machine awake is a courtesy to the work, never a condition for
it: a backend that cannot take its lock records why in ``problem``, logs it
once, and Owl carries on. So :meth:`Inhibitor.hold` never raises, whatever the
backend does. The idempotence, locking and back-off live here, once; a
backend only says how to take a lock and how to let it go.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Generic, TypeVar

log = logging.getLogger("owl.power")

H = TypeVar("H")

# Tail of every problem text: says what the trouble costs the person.
CONSEQUENCE = "the machine may sleep during a Run"


class InhibitError(Exception):
    """A backend could not take its lock; str() is one line saying why."""


class Inhibitor(Generic[H]):
    """Holds at most one lock that keeps the machine from sleeping when idle.

    Thread-safe: the engine holds and releases from its worker thread while
    the daemon may close from another. ``H`` is the backend's handle for a
    held lock (a file descriptor, a child process).
    """

    backend: str = "none"

    def __init__(self, problem: str | None = None, retry_after: float = 30.0) -> None:
        """`problem` is a standing reason this backend cannot work, if any.

        `retry_after` spaces out attempts after a failed hold, so a caller
        that asks on every tick does not hammer a bus that keeps saying no.
        """
        self._mutex = threading.Lock()
        self._handle: H | None = None
        self._problem: str | None = None
        self._logged: set[str] = set()
        self._retry_after = retry_after
        self._failed_at: float | None = None
        self._closed = False
        if problem:
            self._set_problem(problem)

    # -- what a backend provides -------------------------------------------

    def _acquire(self, why: str) -> H:
        """Take the lock; raise InhibitError (or any error) if that fails."""
        raise InhibitError("no way to keep the machine awake")

    def _drop(self, handle: H) -> None:
        """Let the lock go. Must not raise for a lock that is already gone."""

    def _alive(self, handle: H) -> bool:
        """Whether a lock taken earlier is still in force."""
        return True

    # -- the interface ------------------------------------------------------

    def hold(self, why: str) -> None:
        """Keep the machine from idle-sleeping until release(); idempotent.

        `why` is shown to the person by tools that list inhibitors. A second
        hold while one lock is held does nothing (one lock, whatever the
        reason); a lock that died on its own is taken again.
        """
        with self._mutex:
            if self._closed:
                return
            if self._handle is not None:
                if self._alive(self._handle):
                    return
                self._drop_locked()
            if (
                self._failed_at is not None
                and time.monotonic() - self._failed_at < self._retry_after
            ):
                return
            try:
                self._handle = self._acquire(why)
            except Exception as exc:  # never let keep-awake stop a Run
                self._failed_at = time.monotonic()
                self._set_problem(f"cannot keep the machine awake ({exc}): {CONSEQUENCE}")
                return
            self._failed_at = None
            self._problem = None

    def release(self) -> None:
        """Let the machine sleep again when idle; idempotent."""
        with self._mutex:
            self._drop_locked()

    @property
    def held(self) -> bool:
        """Whether the lock is held right now."""
        with self._mutex:
            return self._handle is not None and self._alive(self._handle)

    @property
    def retry_after(self) -> float:
        """Seconds between attempts after a failed hold: a caller whose wish
        stands (a Run works on, a Job waits on) asks again after as long."""
        return self._retry_after

    @property
    def problem(self) -> str | None:
        """Why the machine may sleep during a Run, or None if nothing is wrong."""
        return self._problem

    def close(self) -> None:
        """Release for good: later holds do nothing."""
        with self._mutex:
            self._closed = True
            self._drop_locked()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend!r} held={self.held}>"

    # -- internals ------------------------------------------------------------

    def _drop_locked(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                self._drop(handle)
            except Exception:  # the lock dies with us anyway; say so, go on
                log.exception("letting the keep-awake lock go failed")

    def _set_problem(self, text: str) -> None:
        self._problem = text
        if text not in self._logged:  # say each distinct trouble once
            self._logged.add(text)
            log.warning("%s", text)


class NullInhibitor(Inhibitor[None]):
    """Keeps nothing awake: keep-awake is off, or nothing here can do it."""

    backend = "none"

    def __init__(self, problem: str | None = None) -> None:
        super().__init__(problem)

    def hold(self, why: str) -> None:
        """Do nothing; the reason, if any, is already in ``problem``."""
