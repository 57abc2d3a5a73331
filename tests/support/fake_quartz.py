"""A stand-in for PyObjC's Quartz module: just the calls Owl makes.

It keeps what was asked (taps, their masks and options, enables, requests
for the Input Monitoring grant) and lets a test play the system: grant or
take away the permission (and have preflight lag behind it), send events
through a tap's callback, set the HID idle time, switch a tap off the way
macOS does when its callback is slow, turn Secure Input on, make taps deaf.
CFRunLoopRun blocks its thread until CFRunLoopStop, as the real one does.

As CGEventTapCreate's documentation says, a tap made without the grant has
the events it may not see (the keyboard) cleared from its mask, and none is
made when nothing is left. `person_types()` / `person_moves()` are the person:
the HID counters reset, and every live tap that may hear it is called.
"""

from __future__ import annotations

import importlib.machinery
import threading
import time
import types
from typing import Any, Callable

EVENT_TYPES: dict[str, int] = {
    "kCGEventLeftMouseDown": 1,
    "kCGEventLeftMouseUp": 2,
    "kCGEventRightMouseDown": 3,
    "kCGEventRightMouseUp": 4,
    "kCGEventMouseMoved": 5,
    "kCGEventLeftMouseDragged": 6,
    "kCGEventRightMouseDragged": 7,
    "kCGEventKeyDown": 10,
    "kCGEventKeyUp": 11,
    "kCGEventFlagsChanged": 12,
    "kCGEventScrollWheel": 22,
    "kCGEventOtherMouseDown": 25,
    "kCGEventOtherMouseUp": 26,
    "kCGEventOtherMouseDragged": 27,
}

KEYBOARD_MASK = sum(
    1 << EVENT_TYPES[k] for k in ("kCGEventKeyDown", "kCGEventKeyUp", "kCGEventFlagsChanged")
)


class Tap:
    def __init__(
        self, where: int, place: int, options: int, mask: int, callback: Callable[..., Any]
    ) -> None:
        self.where, self.place, self.options, self.mask = where, place, options, mask
        self.callback = callback
        self.enables: list[bool] = []
        self.valid = True

    @property
    def enabled(self) -> bool:
        return bool(self.enables) and self.enables[-1] and self.valid


class Loop:
    def __init__(self) -> None:
        self.sources: list[Any] = []
        self.stopped = threading.Event()
        self.thread = threading.current_thread()


class FakeQuartz(types.ModuleType):
    kCGSessionEventTap = 1
    kCGHeadInsertEventTap = 0
    kCGEventTapOptionDefault = 0
    kCGEventTapOptionListenOnly = 1
    kCFRunLoopCommonModes = "kCFRunLoopCommonModes"
    kCGEventSourceStateHIDSystemState = 1
    kCGAnyInputEventType = 0xFFFFFFFF
    kCGEventTapDisabledByTimeout = 0xFFFFFFFE
    kCGEventTapDisabledByUserInput = 0xFFFFFFFF

    def __init__(self, granted: bool = True) -> None:
        super().__init__("Quartz")
        self.preflight: bool | None = None  # None: preflight tells the truth
        self.__spec__ = importlib.machinery.ModuleSpec("Quartz", None)
        for name, value in EVENT_TYPES.items():
            setattr(self, name, value)
        self.granted = granted
        self.refuse_taps = False
        self.requests = 0
        self.taps: list[Tap] = []
        self.loops: list[Loop] = []
        # When the HID system last saw input (any; pointer moves), so that the
        # counters grow with time as the real ones do.
        self._any_at = self._pointer_at = time.monotonic()
        self.secure_input = False  # taps hear no keys
        self.deaf = False  # taps hear nothing (the grant went, say)
        self.idle_asked: list[tuple[int, int]] = []
        self._local = threading.local()

    @property
    def idle(self) -> float:
        """Seconds since any input, as the HID system counts it."""
        return time.monotonic() - self._any_at

    @idle.setter
    def idle(self, seconds: float) -> None:
        self._any_at = time.monotonic() - seconds

    @property
    def pointer_idle(self) -> float:
        """Seconds since the pointer last moved."""
        return time.monotonic() - self._pointer_at

    @pointer_idle.setter
    def pointer_idle(self, seconds: float) -> None:
        self._pointer_at = time.monotonic() - seconds

    # -- permission
    def CGPreflightListenEventAccess(self) -> bool:
        return self.granted if self.preflight is None else self.preflight

    def CGRequestListenEventAccess(self) -> bool:
        self.requests += 1
        return self.granted

    # -- taps and run loops
    def CGEventTapCreate(self, where, place, options, mask, callback, refcon):
        if not self.granted:
            mask &= ~KEYBOARD_MASK
        if self.refuse_taps or not mask:
            return None
        tap = Tap(where, place, options, mask, callback)
        self.taps.append(tap)
        return tap

    def CFMachPortCreateRunLoopSource(self, allocator, tap, order):
        return ("source", tap)

    def CFRunLoopGetCurrent(self) -> Loop:
        loop = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = Loop()
            self.loops.append(loop)
        return loop

    def CFRunLoopAddSource(self, loop: Loop, source, mode) -> None:
        loop.sources.append((source, mode))

    def CGEventTapEnable(self, tap: Tap, on: bool) -> None:
        tap.enables.append(bool(on))

    def CFRunLoopRun(self) -> None:
        self.CFRunLoopGetCurrent().stopped.wait()

    def CFRunLoopStop(self, loop: Loop) -> None:
        loop.stopped.set()

    def CFMachPortInvalidate(self, tap: Tap) -> None:
        tap.valid = False

    # -- idle time
    def CGEventSourceSecondsSinceLastEventType(self, state: int, event_type: int) -> float:
        self.idle_asked.append((state, event_type))
        if event_type == EVENT_TYPES["kCGEventMouseMoved"]:
            return self.pointer_idle
        return self.idle

    # -- the test plays the system
    def live_tap(self) -> Tap:
        live = [t for t in self.taps if t.enabled]
        assert len(live) == 1, f"{len(live)} live taps"
        return live[0]

    def send(self, event_type: str | int = "kCGEventMouseMoved", event: Any = "an event") -> Any:
        kind = EVENT_TYPES[event_type] if isinstance(event_type, str) else event_type
        tap = self.live_tap()
        if not tap.mask & (1 << kind) and kind < 0xFFFFFFF0:
            return event  # not asked for: the system would not call back
        return tap.callback(None, kind, event, None)

    def person_types(self) -> int:
        """A key press: counted by the HID system; heard by the taps that may
        hear keys, unless Secure Input is on. Returns how many taps heard it."""
        self.idle = 0.0
        return self._hear("kCGEventKeyDown", keyboard=True)

    def person_moves(self) -> int:
        self.idle = self.pointer_idle = 0.0
        return self._hear("kCGEventMouseMoved", keyboard=False)

    def _hear(self, kind_name: str, *, keyboard: bool) -> int:
        kind = EVENT_TYPES[kind_name]
        if self.deaf or (keyboard and self.secure_input):
            return 0
        heard = 0
        for tap in [t for t in self.taps if t.enabled and t.mask & (1 << kind)]:
            tap.callback(None, kind, "an event", None)
            heard += 1
        return heard
