"""Sending to the channels: a thread per channel, a backoff, and the last answer.

A channel that fails is tried again after 5 s, 15 s, 45 s … (at most 10 min
apart, at most `TRIES` times a message); a hung one holds up only its own
thread (each send is bounded, see `channels.send`): never the engine, never
another channel. A channel that falls behind keeps the newest `BACKLOG`
messages.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from owl.notify import channels

log = logging.getLogger("owl.notify")

FIRST_RETRY = 5.0
RETRY_FACTOR = 3.0
RETRY_MAX = 600.0
TRIES = 5
BACKLOG = 20

SendFn = Callable[[str, str, str], channels.Answer]


@dataclass
class Result:
    """A channel's last send, for `owl status`."""

    ok: bool
    text: str
    at: float
    title: str


class Channel:
    """One URL, its queue and its thread."""

    def __init__(self, url: str, index: int, send: SendFn) -> None:
        self.url = url
        self.masked = channels.mask(url)
        self._send = send
        self._q: collections.deque[tuple[str, str]] = collections.deque(maxlen=BACKLOG)
        self._cv = threading.Condition()
        self._stopping = False
        self.last: Result | None = None
        self.retry_at: float | None = None  # wall time of the next try, while backing off
        self.sending = False
        self.problem: str | None = None  # why Apprise cannot use it (read on its thread)
        self._thread = threading.Thread(
            target=self._main, daemon=True, name=f"owl-notify-send-{index}"
        )
        self._thread.start()

    def put(self, title: str, body: str) -> None:
        with self._cv:
            self._q.append((title, body))
            self._cv.notify()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()

    def _wait(self, seconds: float) -> bool:
        """Wait `seconds` unless stopped; False when stopping."""
        end = time.monotonic() + seconds
        with self._cv:
            while not self._stopping and time.monotonic() < end:
                self._cv.wait(end - time.monotonic())
            return not self._stopping

    def _main(self) -> None:
        # Apprise's parse of the URL, here rather than at the daemon's start
        # (importing Apprise is most of what a channel costs)
        try:
            self.problem = channels.problem(self.url)
        except Exception as e:  # a plugin's bug: the sends will say more
            self.problem = f"Apprise could not read it: {type(e).__name__}"
        if self.problem:
            log.warning("notify: %s cannot be used: %s", self.masked, self.problem)
        while True:
            with self._cv:
                while not self._q and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                title, body = self._q.popleft()
            delay = FIRST_RETRY
            for attempt in range(1, TRIES + 1):
                self.sending = True
                try:
                    answer = self._send(self.url, title, body)
                except Exception as e:  # a bug in a send is a failed send
                    answer = channels.Answer(False, f"{self.masked}: failed: {type(e).__name__}")
                self.sending = False
                self.last = Result(answer.ok, answer.text, time.time(), title)
                if answer.ok:
                    log.info("notify: sent %r to %s", title, self.masked)
                    self.retry_at = None
                    break
                log.warning("notify: %s (try %d of %d)", answer.text, attempt, TRIES)
                if attempt == TRIES:
                    self.retry_at = None
                    break
                self.retry_at = time.time() + delay
                if not self._wait(delay):
                    return
                delay = min(RETRY_MAX, delay * RETRY_FACTOR)

    def view(self) -> dict:
        last = self.last
        return {
            "url": self.masked,
            "problem": self.problem,
            "queued": len(self._q),
            "sending": self.sending,
            "retry_at": None if self.retry_at is None else round(self.retry_at, 3),
            "last": None
            if last is None
            else {"ok": last.ok, "answer": last.text, "at": round(last.at, 3), "title": last.title},
        }


class Sender:
    """Every channel of `notify.away`."""

    def __init__(self, urls: list[str], send: SendFn) -> None:
        self.channels = [Channel(u, i, send) for i, u in enumerate(urls)]

    def put(self, title: str, body: str) -> None:
        for ch in self.channels:
            ch.put(title, body)

    def stop(self) -> None:
        for ch in self.channels:
            ch.stop()

    def view(self) -> list[dict]:
        return [ch.view() for ch in self.channels]
