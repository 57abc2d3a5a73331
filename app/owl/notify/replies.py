"""Replies from the phone, with no open port on the laptop: ntfy's JSON stream
and Telegram's `getUpdates` long poll, each on a thread of its own.

Each listener turns what arrives into an `Incoming` and hands it to `handle`,
which answers with the acknowledgement to send back on the same channel.
What is never acted on: a message older than the daemon's start; one already
seen (its id is kept in the store through `remember`, so a replay after a
restart is not acted on twice); Owl's own messages (titled "Owl…" or tagged
`owl`, as Owl sends them); on Telegram, any chat but the configured one; more
than `RATE_MOST` replies within `RATE_PER` seconds.

A listener that loses its connection reconnects after 1 s, 2 s, 4 s … at most
a minute apart, and says why in `problem` meanwhile.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from owl.notify import words
from owl.notify.channels import mask

if TYPE_CHECKING:
    from http.client import HTTPResponse


def _request(
    url: str, timeout: float, headers: dict[str, str], data: bytes | None = None
) -> HTTPResponse:
    """GET `url` (POST `data`, if given), the response open. `urllib.request`
    is imported here, when a listener first talks: with `http.client` under
    it, it is about a tenth of the daemon's start (24 of some 230 ms of CPU),
    and most people listen on no reply channel."""
    import urllib.request

    method = "GET" if data is None else "POST"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    resp: HTTPResponse = urllib.request.urlopen(req, timeout=timeout)
    return resp


log = logging.getLogger("owl.notify")

RATE_PER = 60.0
RATE_MOST = 10
TEXT_MAX = 4000  # a reply longer than this is not read past it
STREAM_READ = 120.0  # ntfy sends a keepalive every 45 s by default
POLL_S = 25  # Telegram's long poll
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
ACK_TIMEOUT = 10.0
TELEGRAM_API = "https://api.telegram.org"


@dataclass(frozen=True)
class Incoming:
    channel: str  # "ntfy" or "tgram"
    id: str  # the stream's own id for it
    text: str
    at: float  # when it was sent (epoch)
    about_job: int | None = None  # the Job of the message it answers (Telegram)


Handle = Callable[[Incoming], str | None]
Remember = Callable[[str, str], bool]  # (channel, id) -> first time seen


class RateLimit:
    """At most `most` within `per` seconds; pure but for the times it is given."""

    def __init__(self, most: int = RATE_MOST, per: float = RATE_PER) -> None:
        self.most, self.per = most, per
        self._times: list[float] = []

    def allow(self, now: float) -> bool:
        self._times = [t for t in self._times if now - t < self.per]
        if len(self._times) >= self.most:
            return False
        self._times.append(now)
        return True


class Listener:
    """What both listeners share: the thread, the filters, the backoff."""

    channel = ""

    def __init__(self, url: str, *, started_at: float, remember: Remember, handle: Handle) -> None:
        self.url = url
        self.masked = mask(url)
        self.started_at = started_at
        self._remember = remember
        self._handle = handle
        self._stop = threading.Event()
        self._rate = RateLimit()
        self._limited_said = False
        self.problem: str | None = None
        self.connected = False
        self.heard = 0
        self._thread = threading.Thread(
            target=self._main, daemon=True, name=f"owl-notify-{self.channel}"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def view(self) -> dict:
        return {
            "url": self.masked,
            "connected": self.connected,
            "problem": self.problem,
            "heard": self.heard,
        }

    def _main(self) -> None:
        delay = BACKOFF_FIRST
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.listen()
                self.problem = None
            except Exception as e:  # the network, the server, a bad answer: try again
                self.problem = f"{type(e).__name__}: {self._scrubbed(str(e))}"
                log.warning("notify: replies from %s: %s", self.masked, self.problem)
            self.connected = False
            if time.monotonic() - began > 30:
                delay = BACKOFF_FIRST
            if self._stop.wait(delay):
                return
            delay = min(BACKOFF_MAX, delay * 2)

    def _scrubbed(self, text: str) -> str:
        from owl.notify.channels import scrub

        return " ".join(scrub(text, self.url).split())[:200]

    def take(self, msg: Incoming) -> None:
        """One message from the stream: acted on at most once, then answered."""
        if msg.at < self.started_at:
            return
        if not self._remember(msg.channel, msg.id):
            return
        if not self._rate.allow(time.monotonic()):
            if not self._limited_said:
                self._limited_said = True
                self._ack(
                    msg,
                    f"Too many replies; Owl reads at most {RATE_MOST} a minute. "
                    "Wait a minute and send it again.",
                )
            return
        self._limited_said = False
        self.heard += 1
        try:
            answer = self._handle(msg)
        except Exception:
            log.exception("notify: a reply could not be carried out")
            answer = "Owl could not carry that out (see its log)."
        if answer:
            self._ack(msg, answer)

    def _ack(self, msg: Incoming, text: str) -> None:
        try:
            self.answer(msg, text)
        except Exception as e:
            log.warning("notify: could not answer on %s: %s", self.masked, self._scrubbed(str(e)))

    def listen(self) -> None:  # pragma: no cover - each listener has its own
        raise NotImplementedError

    def answer(self, msg: Incoming, text: str) -> None:  # pragma: no cover
        raise NotImplementedError


def ntfy_base(url: str) -> tuple[str, dict[str, str]]:
    """`ntfys://[user:pass@]host/topic` -> ("https://host/topic", auth headers)."""
    scheme, _, rest = url.partition("://")
    http = "https" if scheme == "ntfys" else "http"
    rest = rest.split("?", 1)[0].strip("/")
    authority, _, topic = rest.partition("/")
    user, at, host = authority.rpartition("@")
    headers = {}
    if at:
        headers["Authorization"] = (
            "Basic " + base64.b64encode(urllib.parse.unquote(user).encode()).decode()
        )
    if not host or not topic or "/" in topic:
        raise ValueError("an ntfy reply URL is ntfys://HOST/TOPIC")
    return f"{http}://{host}/{topic}", headers


class NtfyListener(Listener):
    """An ntfy topic's JSON stream (`GET /TOPIC/json?since=…`)."""

    channel = "ntfy"

    def __init__(self, url: str, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(url, **kw)
        self.base, self.headers = ntfy_base(url)
        self._since = str(int(self.started_at))

    def listen(self) -> None:
        url = f"{self.base}/json?since={self._since}"
        with _request(url, STREAM_READ, self.headers) as resp:
            self.connected = True
            self.problem = None
            for raw in resp:
                if self._stop.is_set():
                    return
                self._line(raw)

    def _line(self, raw: bytes) -> None:
        try:
            m = json.loads(raw)
        except ValueError:
            return
        if not isinstance(m, dict) or m.get("event") != "message":
            return
        mid = str(m.get("id") or "")
        if not mid:
            return
        self._since = mid
        raw_tags = m.get("tags")
        tags: list[object] = raw_tags if isinstance(raw_tags, list) else []
        title = str(m.get("title") or "")
        if "owl" in tags or title.startswith("Owl"):
            return  # Owl's own message on the same topic
        at = m.get("time")
        self.take(
            Incoming(
                "ntfy",
                mid,
                str(m.get("message") or "")[:TEXT_MAX],
                float(at) if isinstance(at, (int, float)) else 0.0,
            )
        )

    def answer(self, msg: Incoming, text: str) -> None:
        headers = {**self.headers, "Title": "Owl", "Tags": "owl"}
        with _request(self.base, ACK_TIMEOUT, headers, text.encode("utf-8")) as resp:
            resp.read()


def telegram_parts(url: str) -> tuple[str, str]:
    """`tgram://BOT_TOKEN/CHAT_ID` -> (token, chat id)."""
    _, _, rest = url.partition("://")
    parts = [p for p in rest.split("?", 1)[0].split("/") if p]
    if len(parts) < 2:
        raise ValueError("a Telegram reply URL is tgram://BOT_TOKEN/CHAT_ID")
    token = parts[0][3:] if parts[0].startswith("bot") else parts[0]
    return token, parts[1]


class TelegramListener(Listener):
    """A bot's `getUpdates` long poll; only the configured chat is heard."""

    channel = "tgram"

    def __init__(self, url: str, *, api: str | None = None, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(url, **kw)
        self.token, self.chat = telegram_parts(url)
        self.api = (api or TELEGRAM_API).rstrip("/")
        self._offset = 0

    def _call(self, method: str, params: dict, timeout: float) -> dict:
        url = f"{self.api}/bot{self.token}/{method}"
        headers = {"Content-Type": "application/json"}
        with _request(url, timeout, headers, json.dumps(params).encode()) as resp:
            out = json.loads(resp.read())
        if not isinstance(out, dict) or not out.get("ok"):
            raise ValueError(f"{method} answered {str(out)[:100]}")
        return out

    def listen(self) -> None:
        while not self._stop.is_set():
            out = self._call(
                "getUpdates",
                {"offset": self._offset, "timeout": POLL_S, "allowed_updates": ["message"]},
                POLL_S + 15,
            )
            self.connected = True
            self.problem = None
            for upd in out.get("result") or []:
                if isinstance(upd, dict) and isinstance(upd.get("update_id"), int):
                    self._offset = max(self._offset, upd["update_id"] + 1)
                    self._update(upd)

    def _update(self, upd: dict) -> None:
        msg = upd.get("message")
        if not isinstance(msg, dict):
            return
        raw_chat = msg.get("chat")
        chat: dict[str, object] = raw_chat if isinstance(raw_chat, dict) else {}
        if str(chat.get("id")) != self.chat:
            return  # only the configured chat is heard
        text = msg.get("text")
        if not isinstance(text, str):
            return
        about = None
        parent = msg.get("reply_to_message")
        if isinstance(parent, dict):
            about = words.job_of(str(parent.get("text") or ""))
        date = msg.get("date")
        self._reply_to = msg.get("message_id")  # the answer is a reply to it
        self.take(
            Incoming(
                "tgram",
                str(upd["update_id"]),
                text[:TEXT_MAX],
                float(date) if isinstance(date, (int, float)) else 0.0,
                about,
            )
        )

    def answer(self, msg: Incoming, text: str) -> None:
        params: dict = {"chat_id": self.chat, "text": text}
        reply_to = getattr(self, "_reply_to", None)
        if isinstance(reply_to, int):
            params["reply_to_message_id"] = reply_to
        self._call("sendMessage", params, ACK_TIMEOUT)
