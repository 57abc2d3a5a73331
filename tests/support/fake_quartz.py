"""A stand-in for PyObjC's Quartz module: just the calls Owl makes.

It keeps what was asked (taps, their masks and options, enables, requests
for the Input Monitoring grant) and lets a test play the system: grant or
take away the permission, send events through a tap's callback, set the
HID idle time, switch a tap off the way macOS does when its callback is slow.
CFRunLoopRun blocks its thread until CFRunLoopStop, as the real one does.
"""

from __future__ import annotations

import importlib.machinery
import threading
import types
from typing import Any, Callable

EVENT_TYPES = {
    "kCGEventLeftMouseDown": 1, "kCGEventLeftMouseUp": 2, "kCGEventRightMouseDown": 3,
    "kCGEventRightMouseUp": 4, "kCGEventMouseMoved": 5, "kCGEventLeftMouseDragged": 6,
    "kCGEventRightMouseDragged": 7, "kCGEventKeyDown": 10, "kCGEventKeyUp": 11,
    "kCGEventFlagsChanged": 12, "kCGEventScrollWheel": 22, "kCGEventOtherMouseDown": 25,
    "kCGEventOtherMouseUp": 26, "kCGEventOtherMouseDragged": 27,
}


class Tap:
    def __init__(self, where: int, place: int, options: int, mask: int,
                 callback: Callable[..., Any]) -> None:
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
        self.__spec__ = importlib.machinery.ModuleSpec("Quartz", None)
        for name, value in EVENT_TYPES.items():
            setattr(self, name, value)
        self.granted = granted
        self.refuse_taps = False
        self.requests = 0
        self.taps: list[Tap] = []
        self.loops: list[Loop] = []
        self.idle = 0.0
        self.idle_asked: list[tuple[int, int]] = []
        self._local = threading.local()

    # -- permission
    def CGPreflightListenEventAccess(self) -> bool:
        return self.granted

    def CGRequestListenEventAccess(self) -> bool:
        self.requests += 1
        return self.granted

    # -- taps and run loops
    def CGEventTapCreate(self, where, place, options, mask, callback, refcon):
        if not self.granted or self.refuse_taps:
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
            return event      # not asked for: the system would not call back
        return tap.callback(None, kind, event, None)
