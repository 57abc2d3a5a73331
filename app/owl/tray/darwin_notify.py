"""macOS notifications attributed to Owl: UNUserNotificationCenter inside Owl.app.

`osascript -e 'display notification ...'` (pystray's way) is attributed to
Script Editor, and macOS 15 drops it silently until Script Editor has been
allowed to notify. UNUserNotificationCenter shows Owl's own name and icon and
asks the person once, but works only in an app bundle with an identifier
(outside one it raises). So inside Owl.app the center is used; outside a
bundle, without PyObjC's UserNotifications, or once the person has said no,
`notify` returns False and the caller falls back to osascript.

No notice is lost on the way: those posted while the person is still being
asked are held until the answer (or `ANSWER_WAIT`), then posted or handed to
osascript; one the center refuses when posted (an ad-hoc-signed app is
refused with "UNErrorDomain 1") goes to osascript too, and so does every
later one.
"""

from __future__ import annotations

import itertools
import logging
import subprocess
import threading
from typing import Any, Callable

log = logging.getLogger("owl.tray")

ANSWER_WAIT = 60.0  # how long notices wait for the person's answer before osascript
OSASCRIPT_TIMEOUT = 10.0

Fallback = Callable[[str, str], None]


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def osascript_notify(title: str, message: str) -> None:
    """`display notification` through osascript, off the caller's thread."""
    script = f"display notification {_quoted(message)} with title {_quoted(title)}"

    def run() -> None:
        try:
            subprocess.run(
                ["osascript", "-e", script],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=OSASCRIPT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as e:
            log.info("notification not shown: %s", e)

    threading.Thread(target=run, name="owl-osascript", daemon=True).start()


class OsascriptNotifier:
    """Outside Owl.app: osascript, on a thread of its own, so that the run loop
    (where notices are handed over) never waits for it."""

    def notify(self, title: str, message: str) -> bool:
        osascript_notify(title, message)
        return True


class BundleNotifier:
    """Posts notifications through the app's UNUserNotificationCenter."""

    def __init__(
        self, un: Any, *, fallback: Fallback = osascript_notify, answer_wait: float = ANSWER_WAIT
    ) -> None:
        self._un = un
        self._fallback = fallback
        self._answer_wait = answer_wait
        self._center = un.UNUserNotificationCenter.currentNotificationCenter()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._held: list[tuple[str, str]] = []
        self._timer: threading.Timer | None = None
        self.allowed: bool | None = None  # None until the person answers
        options = un.UNAuthorizationOptionAlert | un.UNAuthorizationOptionSound
        self._center.requestAuthorizationWithOptions_completionHandler_(options, self._answered)

    def _answered(self, granted: bool, error: Any) -> None:
        with self._lock:
            self.allowed = bool(granted)
            held, self._held = self._held, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if not granted:
            log.info(
                "notifications are not allowed for Owl (System Settings > Notifications);"
                " falling back to osascript%s",
                f": {error}" if error else "",
            )
        for title, message in held:
            if granted:
                self._post(title, message)
            else:
                self._fallback(title, message)

    def _no_answer(self) -> None:
        """Nobody answered in time: what is held goes through osascript."""
        with self._lock:
            held, self._held = self._held, []
            self._timer = None
        for title, message in held:
            self._fallback(title, message)

    def notify(self, title: str, message: str) -> bool:
        """Post (or hold) one notification; False when the caller's fallback
        should be used instead."""
        with self._lock:
            if self.allowed is False:
                return False
            if self.allowed is None:
                self._held.append((title, message))
                if self._timer is None:
                    self._timer = threading.Timer(self._answer_wait, self._no_answer)
                    self._timer.daemon = True
                    self._timer.start()
                return True
        self._post(title, message)
        return True

    def _post(self, title: str, message: str) -> None:
        un = self._un
        content = un.UNMutableNotificationContent.alloc().init()
        content.setTitle_(title)
        content.setBody_(message)
        request = un.UNNotificationRequest.requestWithIdentifier_content_trigger_(
            f"owl-{next(self._ids)}", content, None
        )
        self._center.addNotificationRequest_withCompletionHandler_(
            request, lambda error: self._added(error, title, message)
        )

    def _added(self, error: Any, title: str, message: str) -> None:
        if error is None:
            return
        # Refused after all (an ad-hoc signature, a revoked permission): this
        # one and every later one go through osascript.
        log.info("notification refused by the center (%s); through osascript", error)
        with self._lock:
            self.allowed = False
        self._fallback(title, message)


def make_notifier(
    *,
    un: Any = None,
    foundation: Any = None,
    executable: str | None = None,
    fallback: Fallback = osascript_notify,
) -> BundleNotifier | None:
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
        return BundleNotifier(un, fallback=fallback)
    except Exception as e:  # ImportError, or the center refusing this process
        log.info("notifications through osascript: %s", e)
        return None
