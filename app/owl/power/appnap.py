"""macOS App Nap: opted out of while the daemon runs.

A windowless app is a candidate for App Nap, which throttles its timers and
CPU: the 1 s watch and the 5 s between SIGTERM and SIGKILL could stretch to
many seconds. An activity begun with `NSActivityUserInitiatedAllowingIdle
SystemSleep` keeps Owl's timers on time without keeping the machine awake
(that is `caffeinate`'s job, and only while a Run works). The token must be
kept: the activity ends when it is released, or at `end()`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger("owl.power")

REASON = "Owl supervises coding agents: its freeze and kill timers must keep time"


class Activity:
    """A begun NSProcessInfo activity; `end()` lets App Nap back in."""

    def __init__(self, info: Any, token: Any) -> None:
        self._info = info
        self._token = token

    def end(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            self._info.endActivity_(token)


def begin(reason: str = REASON, *, foundation: Any = None) -> Activity | None:
    """Opt this process out of App Nap (macOS only; None elsewhere or
    without PyObjC, which is logged)."""
    if foundation is None:
        if sys.platform != "darwin":
            return None
        try:
            import Foundation as foundation  # type: ignore[import-not-found, no-redef]
        except ImportError as e:
            log.warning("App Nap may slow Owl's timers: PyObjC's Foundation is missing (%s)", e)
            return None
    info = foundation.NSProcessInfo.processInfo()
    options = foundation.NSActivityUserInitiatedAllowingIdleSystemSleep
    token = info.beginActivityWithOptions_reason_(options, reason)
    return Activity(info, token)
