"""Stand-in for PyObjC's AppKit: NSApplication's run loop and termination."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import types

from _fake_runloop import MAIN, Anything, MainOnly, note, on_main

NSApplicationDefined = 15
NSVariableStatusItemLength = -1.0
NSOnState, NSOffState = 1, 0
NSFontAttributeName = "NSFont"
NSTerminateCancel, NSTerminateNow, NSTerminateLater = 0, 1, 2
NSPoint = lambda x, y: (x, y)  # noqa: E731
NSEvent = Anything("NSEvent")
NSApplicationActivationPolicyRegular, NSApplicationActivationPolicyAccessory = 0, 1
NSImage = MainOnly("NSImage")
NSMenu = MainOnly("NSMenu")
NSMenuItem = MainOnly("NSMenuItem")
NSFont = Anything("NSFont")


class _StatusBar:
    def thickness(self) -> float:
        return 22.0

    def statusItemWithLength_(self, length: float) -> MainOnly:
        on_main("statusItemWithLength_")
        return MainOnly("NSStatusItem")

    def removeStatusItem_(self, item: object) -> None:
        on_main("removeStatusItem_")
        note("removeStatusItem_")


NSStatusBar = types.SimpleNamespace(systemStatusBar=lambda: _BAR)
_BAR = _StatusBar()


class FakeApplication:
    """NSApp: `run` works the main-thread queue until `stop_`; SIGUSR1 stands
    for the person pressing Cmd-Q (or logging out): it calls `terminate_`."""

    def __init__(self) -> None:
        self._delegate = None
        self._stopped = False
        self.pending = False

    def setDelegate_(self, delegate: object) -> None:
        note("setDelegate_", type(delegate).__name__)
        self._delegate = delegate

    def delegate(self) -> object:
        return self._delegate

    def setActivationPolicy_(self, policy: int) -> bool:
        on_main("setActivationPolicy_")
        note("setActivationPolicy_", {0: "regular", 1: "accessory"}.get(policy, policy))
        return True

    def run(self) -> None:
        assert threading.current_thread() is threading.main_thread()
        signal.signal(signal.SIGUSR1, lambda *_: MAIN.put(lambda: self.terminate_(None)))
        note("run")
        while not self._stopped:
            try:
                fn = MAIN.get(timeout=0.05)
            except queue.Empty:
                continue
            fn()
        self._stopped = False
        note("run returned")

    def stop_(self, sender: object) -> None:
        note("stop_")
        self._stopped = True

    def postEvent_atStart_(self, event: object, at_start: bool) -> None:
        MAIN.put(lambda: None)

    def terminate_(self, sender: object) -> None:
        assert threading.current_thread() is threading.main_thread()
        if self.pending:
            note("terminate_ (already pending)")
            return
        reply = NSTerminateNow
        if self._delegate is not None:
            reply = self._delegate.applicationShouldTerminate_(self)
        note("terminate_", {0: "cancel", 1: "now", 2: "later"}[reply])
        if reply == NSTerminateNow:
            self._exit()
        elif reply == NSTerminateLater:
            self.pending = True

    def replyToApplicationShouldTerminate_(self, ok: bool) -> None:
        assert threading.current_thread() is threading.main_thread()
        note("replyToApplicationShouldTerminate_", ok)
        self.pending = False
        if ok:
            self._exit()

    def _exit(self) -> None:
        note("exit")
        sys.stderr.flush()
        os._exit(0)


_APP = FakeApplication()
NSApplication = types.SimpleNamespace(sharedApplication=lambda: _APP)
