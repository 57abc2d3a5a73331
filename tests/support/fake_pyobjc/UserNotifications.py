"""Stand-in for PyObjC's UserNotifications: the person's answer is
$FAKE_UN_GRANTED ("1" by default), given at once unless the center is told
to `defer` it (the test answers later with `answer`); `refuse_posts` makes
every post fail as an ad-hoc-signed app's does; every request is logged."""

from __future__ import annotations

import os
import types

from _fake_runloop import note

UNAuthorizationOptionBadge, UNAuthorizationOptionSound, UNAuthorizationOptionAlert = 1, 2, 4


class UNMutableNotificationContent:
    @classmethod
    def alloc(cls):
        return cls()

    def init(self):
        self.title = self.body = ""
        return self

    def setTitle_(self, title: str) -> None:
        self.title = title

    def setBody_(self, body: str) -> None:
        self.body = body


class UNNotificationRequest:
    @classmethod
    def requestWithIdentifier_content_trigger_(cls, ident, content, trigger):
        r = cls()
        r.ident, r.content, r.trigger = ident, content, trigger
        return r


class _Center:
    def __init__(self) -> None:
        self.posted: list = []
        self.defer = False
        self.refuse_posts: str | None = None
        self._asking = None

    def requestAuthorizationWithOptions_completionHandler_(self, options, handler):
        granted = os.environ.get("FAKE_UN_GRANTED", "1") == "1"
        note("requestAuthorization", options, granted)
        if self.defer:
            self._asking = handler
            return
        handler(granted, None if granted else "denied")

    def answer(self, granted: bool) -> None:
        handler, self._asking = self._asking, None
        handler(granted, None if granted else "denied")

    def addNotificationRequest_withCompletionHandler_(self, request, handler):
        if self.refuse_posts:
            note("refused", request.ident, request.content.title)
            handler(self.refuse_posts)
            return
        self.posted.append(request)
        note("notification", request.ident, request.content.title, "|", request.content.body)
        handler(None)


_CENTER = _Center()
UNUserNotificationCenter = types.SimpleNamespace(currentNotificationCenter=lambda: _CENTER)
