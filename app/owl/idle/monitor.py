"""IdleMonitor: input hooks and idle readers behind one object.

Hooks say "input, now" as it happens (so the engine can freeze at once and
needs no polling); readers say "idle for N seconds" when asked (they know
about input from before Owl started, and stand in when hooks cannot run).
`last_input` is the later of the two.

Backends are chosen once, at `start`, from the platform and the session
(`choose`). Hooks that can also say when input has stopped for `idle.after`
(Mutter's watches, the Wayland idle protocols: they have `watch_quiet`) are
told it (`set_after`), and wake the caller then through `on_change`. A
backend that fails later is logged once and the next one is used; with none left the machine "cannot be read", which the policy treats as
not idle. Nothing here raises into the caller, and no timer runs: a machine
that cannot be read is looked at again only when asked, at most every
`state.RETRY` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from .base import BackendError, Hooks, Reader
from .choose import Plan, choose
from .state import RETRY

log = logging.getLogger("owl.idle")


class IdleMonitor:
    """Input hooks + idle readers, behind one object the engine uses."""

    def __init__(
        self,
        on_input: Callable[[], None],
        *,
        on_change: Callable[[], None] | None = None,
        plan: Callable[[], Plan] = choose,
        retry_every: float = RETRY,
    ) -> None:
        """`on_input` runs on the hook thread for every event and must stay cheap.

        `on_change` (optional) runs on a hook thread when the hooks die, so a
        caller that waits only for input learns that it must look again.
        `plan` picks the backends; `retry_every` is how often, at most, a
        machine that cannot be read is tried again (only when asked).
        """
        self._on_input = on_input
        self._on_change = on_change
        self._plan_fn = plan
        self._plan: Plan | None = None
        self._lock = threading.RLock()
        self._hooks: Hooks | None = None
        self._hooks_since: float | None = None
        self._last_hook: float | None = None
        self._reader: Reader | None = None
        # The last failures, for `problem`: a reader's words are the more telling.
        self._error: str | None = None
        self._hooks_error: str | None = None
        self._next_retry = 0.0
        self._retry_every = retry_every
        self._callback_failed = False
        self._after: float | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Choose backends, start the hooks, open the first reader that works."""
        with self._lock:
            self.stop()
            self._error = self._hooks_error = None
            self._next_retry = 0.0
            try:
                self._plan = self._plan_fn()
            except Exception as exc:  # a broken environment must not take the daemon down
                log.warning("idle backends cannot be chosen: %s", exc)
                self._plan = Plan(None, [], f"idle backends cannot be chosen: {exc}")
            self._start_hooks()
            self._open_reader(0)
            if self.problem:
                log.warning("input cannot be read: %s", self.problem)
            else:
                log.info("idle backends: %s", ", ".join(self.backends))

    def stop(self) -> None:
        with self._lock:
            hooks, self._hooks = self._hooks, None
            if hooks is not None:
                hooks.stop()
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.close()

    def set_after(self, after: float) -> None:
        """`idle.after`, for hooks that watch for quiet themselves (cheap when unchanged)."""
        if after == self._after:
            return
        self._after = after
        hooks = self._hooks or (self._plan.hooks if self._plan else None)
        watch = getattr(hooks, "watch_quiet", None)
        if watch is not None:
            watch(after, self._quiet)

    # --------------------------------------------------------------- reading

    def last_input(self) -> float | None:
        """time.monotonic() of the last known input, or None if nothing can be read."""
        idle = self._read()
        now = time.monotonic()
        live = self.hooks_live
        from_reader = None if idle is None else now - idle
        if from_reader is None and not live:
            return None  # old hook stamps say nothing about now
        from_hooks = self._last_hook
        if from_hooks is None and from_reader is None:
            # Hooks alone, no event yet: quiet at least since they started.
            from_hooks = self._hooks_since
        stamps = [t for t in (from_hooks, from_reader) if t is not None]
        return max(stamps) if stamps else None

    def idle_seconds(self) -> float | None:
        """Seconds since the last known input, or None if nothing can be read."""
        last = self.last_input()
        return None if last is None else max(0.0, time.monotonic() - last)

    @property
    def backends(self) -> list[str]:
        """Names of the backends working now, e.g. ["pynput-x11", "xscreensaver"]."""
        names = []
        if self.hooks_live:
            names.append(self._hooks.name)  # type: ignore[union-attr]
        if self._reader is not None and self._reader.name not in names:
            names.append(self._reader.name)  # one object can be both (Wayland)
        return names

    @property
    def hooks_live(self) -> bool:
        """True when input arrives as events (no polling needed)."""
        hooks = self._hooks
        return hooks is not None and hooks.alive

    @property
    def hooks_may_miss(self) -> bool:
        """True when live hooks may not hear every input (a macOS event tap
        under Secure Input): the reader must be asked as well."""
        return self.hooks_live and bool(getattr(self._hooks, "may_miss_input", False))

    @property
    def missing_permission(self) -> tuple[str, str] | None:
        """(the permission, the line that says where to grant it) when the
        hooks run without a permission they need (macOS's Input Monitoring)."""
        hooks = self._hooks
        if hooks is None:
            return None
        missing = getattr(hooks, "missing_permission", None)
        return missing if isinstance(missing, tuple) else None

    @property
    def problem(self) -> str | None:
        """Why the machine cannot be read, one line, or None if it can."""
        if self.hooks_live or self._reader is not None:
            return None
        if self._plan is None:
            return "not started"
        return (
            self._plan.limit or self._error or self._hooks_error or "no idle source on this system"
        )

    # -------------------------------------------------------------- internals

    def _hook_event(self, *_args: object) -> None:
        # The hot path: runs for every mouse move. Stamp, hand on, nothing else.
        self._last_hook = time.monotonic()
        try:
            self._on_input()
        except Exception:
            # A raising callback would stop pynput's listener; log it once instead.
            if not self._callback_failed:
                self._callback_failed = True
                log.exception("on_input failed (further failures are not logged)")

    def _quiet(self) -> None:
        # The hooks say input stopped `after` ago: the caller must look now.
        self._changed()

    def _hooks_died(self, why: str) -> None:
        log.warning("input hooks stopped: %s", why)
        self._hooks_error = why
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("on_change failed")

    def _start_hooks(self) -> None:
        plan = self._plan
        if plan is None or plan.hooks is None:
            return
        watch = getattr(plan.hooks, "watch_quiet", None)
        if watch is not None and self._after is not None:
            watch(self._after, self._quiet)
        try:
            plan.hooks.start(self._hook_event, self._hooks_died)
        except BackendError as exc:
            log.warning("input hooks %s unavailable: %s", plan.hooks.name, exc)
            self._hooks_error = str(exc)
            return
        except Exception as exc:
            log.warning("input hooks %s failed: %s: %s", plan.hooks.name, type(exc).__name__, exc)
            self._hooks_error = f"{plan.hooks.name} failed: {exc}"
            return
        self._hooks = plan.hooks
        self._hooks_error = None
        self._hooks_since = time.monotonic()
        self._last_hook = None

    def _open_reader(self, first: int, *, quiet: bool = False) -> None:
        """Open the first reader from index `first` on that works."""
        self._reader = None
        readers = self._plan.readers if self._plan else []
        for reader in readers[first:]:
            try:
                reader.open()
            except Exception as exc:
                if not quiet:
                    log.info("idle reader %s unavailable: %s", reader.name, exc)
                self._error = self._error or str(exc)  # the first failure is the cause
                continue
            self._reader = reader
            self._error = None
            return

    def _read(self) -> float | None:
        """Idle seconds from the current reader, falling back or retrying as needed."""
        with self._lock:
            if self._plan is None:
                return None
            if self._reader is None and not self.hooks_live:
                self._retry()
            for _ in range(len(self._plan.readers) + 1):
                reader = self._reader
                if reader is None:
                    return None
                try:
                    return reader.idle_seconds()
                except Exception as exc:
                    log.warning("idle reader %s failed: %s", reader.name, exc)
                    self._error = str(exc)
                    if not isinstance(exc, BackendError):
                        self._error = f"{reader.name} failed: {type(exc).__name__}: {exc}"
                    reader.close()
                    index = self._plan.readers.index(reader)
                    self._open_reader(index + 1)
                    if self._reader is None:
                        self._next_retry = time.monotonic() + self._retry_every
            return None

    def _retry(self) -> None:
        """Nothing works: try again from the top, at most every `retry_every` seconds."""
        now = time.monotonic()
        if now < self._next_retry:
            return
        self._next_retry = now + self._retry_every
        self._open_reader(0, quiet=True)
        if self._reader is not None:
            log.info("idle reader %s is back", self._reader.name)
            # The session is back (e.g. a new X server on the same display): hooks too.
            if self._plan and self._plan.hooks is not None and not self.hooks_live:
                self._start_hooks()
