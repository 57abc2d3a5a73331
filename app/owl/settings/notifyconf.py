"""The `[notify]` section: the person's channels, and when they are used.

    [notify]
    away = ["ntfys://ntfy.sh/my-secret-topic"]   # Apprise URLs, used only while away
    away_after = "10m"        # no input this long = away (default: idle.after)
    limit_after = "1h"        # a usage-limit wait longer than this is told
    batch = "60s"             # what comes within this goes as one digest
    quiet = "23:00-07:00"     # nothing then but the urgent kinds
    urgent = ["blocked"]      # review, blocked, exhausted, limit, untouchable, disk
    reply = "ntfys://ntfy.sh/my-secret-topic"    # or "tgram://BOT_TOKEN/CHAT_ID"
    telegram_api = "https://api.telegram.org"    # a Bot API server of one's own

Apart from `config` so that the section's checks and its masking live in one
place; `config` calls `load` and `document`. Errors are ValueError with the
whole one-line message (file, key, value); `config` makes them ConfigError.
A channel URL is a secret: `mask` hides it wherever Owl shows one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

KINDS = ("review", "blocked", "exhausted", "limit", "untouchable", "disk", "sandbox")
REPLY_SCHEMES = ("ntfy", "ntfys", "tgram")
MAX_CHANNELS = 20
MAX_URL = 2000
MAX_WAIT_S = 7 * 86400.0

_HOST = re.compile(r"^(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?\Z")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+\Z")


@dataclass(frozen=True)
class NotifyConfig:
    away: tuple[str, ...] = ()
    away_after: float | None = None  # None: the same as idle.after
    limit_after: float = 3600.0
    batch: float = 60.0
    quiet: tuple[int, int] | None = None  # (start, end) minutes of the day
    urgent: frozenset[str] = frozenset({"blocked"})
    reply: str | None = None
    telegram_api: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


KEYS = ("away", "away_after", "limit_after", "batch", "quiet", "urgent", "reply", "telegram_api")


def hide(part: str) -> str:
    return part[:2] + "…" if len(part) > 2 else "…" if part else ""


def mask(url: str) -> str:
    """`url` with its secrets hidden: "ntfys://ntfy.sh/my…", "tgram://12…/98…".
    The scheme and a host name stay; every other part keeps two characters."""
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        return hide(scheme)
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    _user, at, host = authority.rpartition("@")
    shown = ("…@" if at else "") + (host if _HOST.match(host) else hide(host))
    out = f"{scheme}://{shown}" + "".join("/" + hide(s) for s in path.split("/") if s)
    return out + ("?…" if query else "")


def secrets_of(url: str) -> list[str]:
    """The parts of `url` that `mask` hides, longest first (to scrub them from text)."""
    _, _, rest = str(url).partition("://")
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    user, _, host = authority.rpartition("@")
    parts = [
        p
        for p in re.split(r"[:/&=]", user) + path.split("/") + re.split(r"[&=]", query)
        if len(p) > 2
    ]
    if not _HOST.match(host):
        parts += [p for p in host.split(":") if len(p) > 2] + [host]
    return sorted(set(parts), key=len, reverse=True)


def parse_quiet(text: str) -> tuple[int, int]:
    """ "23:00-07:00" -> (1380, 420). Raises ValueError in words."""
    try:
        a, b = text.split("-")
        out = []
        for part in (a, b):
            h, m = part.strip().split(":")
            if not (
                h.isdigit()
                and m.isdigit()
                and len(m) == 2
                and 0 <= int(h) <= 23
                and 0 <= int(m) <= 59
            ):
                raise ValueError
            out.append(int(h) * 60 + int(m))
    except ValueError:
        raise ValueError('must be two times of day, such as "23:00-07:00"') from None
    return out[0], out[1]


def quiet_text(q: tuple[int, int] | None) -> str:
    if q is None:
        return ""
    return "-".join(f"{m // 60:02d}:{m % 60:02d}" for m in q)


def _show(value: Any, secret: bool = False) -> str:
    if secret and isinstance(value, str):
        value = mask(value)
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (str, list)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _url(v: Any, schemes: tuple[str, ...] | None = None) -> str:
    if not isinstance(v, str) or not _URL.match(v) or len(v) > MAX_URL:
        raise ValueError('must be a URL such as "ntfys://ntfy.sh/my-secret-topic"')
    if schemes is not None and v.split("://")[0] not in schemes:
        raise ValueError(
            "must be an ntfy topic (ntfy://, ntfys://) or a Telegram chat "
            "(tgram://BOT_TOKEN/CHAT_ID)"
        )
    if v.startswith("tgram://") and len([p for p in v[8:].split("?")[0].split("/") if p]) < 2:
        raise ValueError("a Telegram URL is tgram://BOT_TOKEN/CHAT_ID")
    return v


def load(body: Any, where: str, duration: Callable[[str], float]) -> NotifyConfig:
    """The checked `[notify]` table; ValueError naming file, key and value otherwise.
    `duration` reads "90s"-style text (the config's own reader)."""
    if not isinstance(body, dict):
        raise ValueError(f"{where}: notify = {_show(body)}: must be a table [notify]")
    out: dict[str, Any] = {}
    for key, value in body.items():
        secret = key in ("away", "reply")

        def bad(why: str, shown: Any = value, key: str = key, secret: bool = secret) -> ValueError:
            return ValueError(f"{where}: notify.{key} = {_show(shown, secret)}: {why}")

        if key not in KEYS:
            raise ValueError(
                f"{where}: unknown key notify.{key} (known in [notify]: {', '.join(KEYS)})"
            )
        try:
            if key == "away":
                if not isinstance(value, list):
                    raise ValueError("must be a list of Apprise URLs")
                if len(value) > MAX_CHANNELS:
                    raise ValueError(f"at most {MAX_CHANNELS} channels")
                for v in value:
                    try:
                        _url(v)
                    except ValueError as e:
                        raise bad(str(e), v) from None
                out[key] = tuple(value)
            elif key in ("away_after", "limit_after", "batch"):
                if not isinstance(value, str):
                    raise ValueError('a duration is a string such as "90s" or "1h30m"')
                seconds = duration(value)
                if seconds > MAX_WAIT_S:
                    raise ValueError("must be at most 7d")
                if key == "away_after" and seconds <= 0:
                    raise ValueError("must be more than 0s")
                out[key] = seconds
            elif key == "quiet":
                if not isinstance(value, str):
                    raise ValueError('must be two times of day, such as "23:00-07:00"')
                out[key] = parse_quiet(value) if value.strip() else None
            elif key == "urgent":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"must be a list of kinds ({', '.join(KINDS)})")
                unknown = [v for v in value if v not in KINDS]
                if unknown:
                    raise ValueError(f"unknown kind {unknown[0]!r} (known: {', '.join(KINDS)})")
                out[key] = frozenset(value)
            elif key == "reply":
                out[key] = _url(value, REPLY_SCHEMES)
            elif key == "telegram_api":
                if not isinstance(value, str) or not re.match(r"^https?://\S+\Z", value):
                    raise ValueError("must be an http:// or https:// URL")
                out[key] = value
        except ValueError as e:
            if str(e).startswith(f"{where}:"):
                raise
            raise bad(str(e)) from None
    return NotifyConfig(raw=dict(body), **out)


def document(n: NotifyConfig, idle_after: str, fmt: Callable[[float], str]) -> dict[str, Any]:
    """The section as `owl config show` gives it: every key, the URLs masked."""
    doc: dict[str, Any] = {
        "away": [mask(u) for u in n.away],
        "away_after": fmt(n.away_after) if n.away_after is not None else idle_after,
        "limit_after": fmt(n.limit_after),
        "batch": fmt(n.batch),
        "quiet": quiet_text(n.quiet),
        "urgent": sorted(n.urgent),
    }
    if n.reply:
        doc["reply"] = mask(n.reply)
    if n.telegram_api:
        doc["telegram_api"] = n.telegram_api
    return doc
