"""macOS notifications attributed to Owl: UNUserNotificationCenter inside Owl.app.

`osascript -e 'display notification ...'` (pystray's way) is attributed to
Script Editor, and macOS 15 drops it silently until Script Editor has been
allowed to notify. UNUserNotificationCenter shows Owl's own name and icon and
asks the person once, but works only in an app bundle with an identifier
(outside one it raises). So inside Owl.app the center is used; outside a
bundle, without PyObjC's UserNotifications, or once the person has said no,
`notify` returns False and the caller falls back to osascript.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

log = logging.getLogger("owl.tray")


class BundleNotifier:
    """Posts notifications through the app's UNUserNotificationCenter."""

    def __init__(self, un: Any) -> None:
        self._un = un
        self._center = un.UNUserNotificationCenter.currentNotificationCenter()
        self._ids = itertools.count(1)
        self.allowed: bool | None = None          # None until the person answers
        options = un.UNAuthorizationOptionAlert | un.UNAuthorizationOptionSound
        self._center.requestAuthorizationWithOptions_completionHandler_(options, self._answered)

    def _answered(self, granted: bool, error: Any) -> None:
        self.allowed = bool(granted)
        if not granted:
            log.info("notifications are not allowed for Owl (System Settings > Notifications);"
                     " falling back to osascript%s", f": {error}" if error else "")

    def notify(self, title: str, message: str) -> bool:
        """Post one notification; False when the fallback should be used."""
        if self.allowed is False:
            return False
        un = self._un
        content = un.UNMutableNotificationContent.alloc().init()
        content.setTitle_(title)
        content.setBody_(message)
        request = un.UNNotificationRequest.requestWithIdentifier_content_trigger_(
            f"owl-{next(self._ids)}", content, None)
        self._center.addNotificationRequest_withCompletionHandler_(request, self._added)
        return True

    def _added(self, error: Any) -> None:
        if error is not None:
            log.info("notification not shown: %s", error)


def make_notifier(*, un: Any = None, foundation: Any = None,
                  executable: str | None = None) -> BundleNotifier | None:
    """The bundle's notifier, or None where osascript must do (not in a
    bundle, no bundle identifier, no PyObjC UserNotifications)."""
    from owl.bundle import app_bundle

    if app_bundle(executable) is None:
        return None
    try:
        if foundation is None:
            import Foundation as foundation  # type: ignore[import-not-found, no-redef]
        if foundation.NSBundle.mainBundle().bundleIdentifier() is None:
            return None
        if un is None:
            import UserNotifications as un  # type: ignore[import-not-found, no-redef]
        return BundleNotifier(un)
    except Exception as e:      # ImportError, or the center refusing this process
        log.info("notifications through osascript: %s", e)
        return None
