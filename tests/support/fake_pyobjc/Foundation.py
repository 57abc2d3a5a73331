"""Stand-in for PyObjC's Foundation: NSObject, NSProcessInfo, NSBundle."""

from __future__ import annotations

import os
import types

from _fake_runloop import Anything, note

NSActivityUserInitiated = 0x00FFFFFF
NSActivityIdleSystemSleepDisabled = 1 << 20
NSActivityUserInitiatedAllowingIdleSystemSleep = (
    NSActivityUserInitiated & ~NSActivityIdleSystemSleepDisabled
)
NSActivityLatencyCritical = 0xFF00000000
NSAttributedString = Anything("NSAttributedString")
NSDictionary = Anything("NSDictionary")


class NSObject:
    @classmethod
    def alloc(cls):
        return cls.__new__(cls)

    def init(self):
        return self


def NSData(data: bytes) -> bytes:
    return data


class _ProcessInfo:
    def beginActivityWithOptions_reason_(self, options: int, reason: str) -> object:
        note("beginActivityWithOptions_reason_", hex(options), reason)
        return ("activity", options, reason)

    def endActivity_(self, token: object) -> None:
        note("endActivity_")


_INFO = _ProcessInfo()
NSProcessInfo = types.SimpleNamespace(processInfo=lambda: _INFO)


class _Bundle:
    def bundleIdentifier(self):
        return os.environ.get("FAKE_BUNDLE_ID") or None


NSBundle = types.SimpleNamespace(mainBundle=lambda: _Bundle())
