"""The machine as the engine sees it: how long it has been quiet, and its power.

`RealMachine` wraps the idle monitor (input hooks and idle readers) and the
power reader. `ManualMachine` is the same interface driven by hand: the daemon
uses it when `OWL_MACHINE=manual`, so that scripts and tests can say "input"
and "idle" through the control socket on machines whose input cannot be read.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


@dataclass
class Reading:
    idle_for: float | None  # seconds since the last input; None: cannot be read
    on_ac: bool | None  # None: unknown (does not count as AC)
    hooks_live: bool = False  # input arrives as events, no need to poll for it
    hooks_may_miss: bool = False  # ...but not all of it (macOS: Secure Input): poll as well
    power_fixed: bool = False  # no battery: the power cannot change, so it is looked at rarely
    backends: list[str] = field(default_factory=list)
    problem: str | None = None  # why the machine cannot be read
    locked: bool | None = None  # the screen is locked; None: no desktop says
    lock_sources: list[str] = field(default_factory=list)  # who says it (screensaver, logind)
    # a permission the input hooks lack ("Input Monitoring"), and where to grant it
    missing: str | None = None
    permission: str | None = None


QUIET = 86400.0


class Machine(Protocol):
    """What the engine reads the machine through (`ManualMachine`, `RealMachine`):
    started with where input and changes are said, read on its thread."""

    def start(
        self, on_input: Callable[[], None], on_change: Callable[[], None] | None = None
    ) -> None: ...

    def stop(self) -> None: ...

    def read(self) -> Reading: ...


class ManualMachine:
    """A machine whose input and power are set by `owl` commands, for tests and scripts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._quiet = False
        self._quiet_since = 0.0
        self._on_ac: bool | None = True
        self._on_input: Callable[[], None] | None = None

    def start(
        self, on_input: Callable[[], None], on_change: Callable[[], None] | None = None
    ) -> None:
        self._on_input = on_input

    def stop(self) -> None:
        pass

    def set(self, event: str) -> None:
        with self._lock:
            if event == "input":
                self._quiet = False
            elif event == "idle":
                if not self._quiet:
                    self._quiet_since = time.monotonic()
                self._quiet = True
            elif event == "battery":
                self._on_ac = False
            elif event == "ac":
                self._on_ac = True
            elif event == "power-unknown":
                self._on_ac = None
            else:
                raise ValueError(f"unknown machine event {event!r} (input, idle, battery, ac)")
        if event == "input" and self._on_input is not None:
            self._on_input()

    def read(self) -> Reading:
        with self._lock:
            # Told "input", the machine stays in use until told "idle"; told
            # "idle", it has been quiet for a day (longer than any idle.after).
            idle_for = (QUIET + time.monotonic() - self._quiet_since) if self._quiet else 0.0
            return Reading(
                idle_for=idle_for,
                on_ac=self._on_ac,
                hooks_live=True,
                power_fixed=True,
                backends=["manual"],
            )


class RealMachine:
    """Input hooks, idle readers and power, as chosen for this platform at start.

    `after` gives the current `idle.after` (it may be edited while running):
    hooks that watch for quiet themselves (Mutter, the Wayland idle protocols)
    wake the engine when the machine becomes idle, so it need not poll.
    """

    def __init__(
        self, after: Callable[[], float] | None = None, plan: Callable[[], Any] | None = None
    ) -> None:
        from owl import idle

        self._idle = idle
        self._after = after
        # `plan` picks other backends than this platform's (tests: a stand-in Quartz).
        self._monitor = idle.IdleMonitor(
            self._input, on_change=self._changed, plan=plan or idle.choose
        )
        self._power = idle.Power()
        self._on_input: Callable[[], None] | None = None
        self._on_change: Callable[[], None] | None = None

    def _input(self) -> None:
        cb = self._on_input
        if cb is not None:
            cb()

    def _changed(self) -> None:
        # The hooks died (the X server went away): the engine must look again
        # rather than wait for input that will never come.
        cb = self._on_change
        if cb is not None:
            cb()

    def start(
        self, on_input: Callable[[], None], on_change: Callable[[], None] | None = None
    ) -> None:
        self._on_input = on_input
        self._on_change = on_change
        self._tell_after()
        self._monitor.start()

    def _tell_after(self) -> None:
        if self._after is not None:
            self._monitor.set_after(self._after())

    def stop(self) -> None:
        self._monitor.stop()

    def read(self) -> Reading:
        self._tell_after()
        missing = self._monitor.missing_permission
        return Reading(
            idle_for=self._monitor.idle_seconds(),
            on_ac=self._power.on_ac(),
            power_fixed=self._power.fixed,
            hooks_live=self._monitor.hooks_live,
            hooks_may_miss=self._monitor.hooks_may_miss,
            backends=list(self._monitor.backends),
            problem=self._monitor.problem,
            missing=missing[0] if missing else None,
            permission=missing[1] if missing else None,
        )


class _Lock(Protocol):
    def start(self, on_change: Callable[[], None] | None = None) -> None: ...
    def stop(self) -> None: ...
    @property
    def locked(self) -> bool | None: ...
    @property
    def heard(self) -> list[str]: ...


class LockedMachine:
    """Any machine, with the screen's lock (`owl.idle.screenlock.ScreenLock`) in
    each reading. The lock is heard on threads of its own; a change wakes the
    engine through the machine's `on_change`, and the engine reads it then.
    Anything else (`set`, for the manual machine) is the inner machine's."""

    def __init__(self, inner: Machine, lock: _Lock) -> None:
        self.inner = inner
        self.lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def start(
        self, on_input: Callable[[], None], on_change: Callable[[], None] | None = None
    ) -> None:
        self.inner.start(on_input, on_change)
        self.lock.start(on_change)

    def stop(self) -> None:
        self.lock.stop()
        self.inner.stop()

    def read(self) -> Reading:
        return dataclasses.replace(
            self.inner.read(), locked=self.lock.locked, lock_sources=self.lock.heard
        )
