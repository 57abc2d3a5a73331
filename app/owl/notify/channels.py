"""The person's channels: Apprise URLs, shown masked, each send bounded in time.

Apprise (a well-kept library that knows ntfy, Telegram, Pushover, mail, JSON
webhooks and a hundred more services) does the sending; Owl only masks the
URLs, bounds each send, and reads what the service answered.

A channel's URL is a secret (an ntfy topic is the whole of ntfy's access
control; a Telegram URL carries the bot's token), so it is never logged and
always shown masked: the scheme and a host name stay, every other part keeps
its first two characters. Apprise's own log is kept out of Owl's log too (it
may name a URL); what a send answered is read from it per thread, masked.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from owl.settings.notifyconf import hide, mask, secrets_of  # noqa: F401  (mask is read from here too)

SEND_TIMEOUT = 10.0  # seconds for one HTTP connect, and for one read
ANSWER_MAX = 200

_apprise_log = logging.getLogger("apprise")
_apprise_log.propagate = False  # it may name a URL; Owl's log must not


def scrub(text: str, url: str) -> str:
    for secret in secrets_of(url):
        text = text.replace(secret, hide(secret))
    return text


@dataclass(frozen=True)
class Answer:
    ok: bool
    text: str  # what the channel answered, in one masked line


class _ThisThread(logging.Handler):
    """Apprise's log records made on one thread (channels send on threads of their own)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ident = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.ident:
            try:
                self.lines.append(f"{record.levelname.lower()}: {record.getMessage()}")
            except Exception:
                pass


def known(url: str) -> bool:
    """Whether Apprise reads `url` as one of its services."""
    import apprise

    return apprise.Apprise.instantiate(url, suppress_exceptions=True) is not None


def problem(url: str) -> str | None:
    """Why Apprise could not use `url` (None when it can), asked as a send
    would ask it, without sending anything: Apprise's own parse of the URL
    into one of its services. (Its log, which may name the URL, stays out.)"""
    return None if known(url) else "not a URL Apprise knows"


def send(
    url: str,
    title: str,
    body: str,
    *,
    timeout: float = SEND_TIMEOUT,
    telegram_api: str | None = None,
) -> Answer:
    """Send one message through one channel; its answer, in one masked line.

    Each HTTP connect and read is bounded by `timeout` (Apprise's own
    per-service timeouts, set here), so a hung server costs at most about
    twice that; callers run this on a thread of their own all the same."""
    import apprise

    catch = _ThisThread()
    _apprise_log.addHandler(catch)
    if _apprise_log.level == logging.NOTSET or _apprise_log.level > logging.INFO:
        _apprise_log.setLevel(logging.INFO)
    try:
        service = apprise.Apprise.instantiate(url, suppress_exceptions=True)
        if service is None:
            return Answer(False, f"{mask(url)}: not a URL Apprise knows")
        service.socket_connect_timeout = timeout
        service.socket_read_timeout = timeout
        if telegram_api and hasattr(service, "bot_token") and hasattr(service, "notify_url"):
            service.notify_url = telegram_api.rstrip("/") + "/bot"  # a Bot API server of one's own
        try:
            ok = bool(service.notify(body=body, title=title))
        except Exception as e:  # a plugin's bug is this channel's failure, nothing more
            ok = False
            catch.lines.append(f"error: {type(e).__name__}: {e}")
    finally:
        _apprise_log.removeHandler(catch)
    if ok:  # what the service said last, e.g. "Sent ntfy notification to …"
        said = [ln.partition(": ")[2] for ln in catch.lines if ln.startswith("info: ")][-1:]
    else:  # every warning and error, in order, once each
        said = [ln for ln in catch.lines if not ln.startswith("info: ")] or catch.lines
    text = " / ".join(dict.fromkeys(said)) or ("sent" if ok else "failed, and said nothing")
    text = " ".join(scrub(text, url).split())
    if len(text) > ANSWER_MAX:
        text = text[: ANSWER_MAX - 1] + "…"
    return Answer(ok, f"{mask(url)}: {'ok' if ok else 'failed'}: {text}")
