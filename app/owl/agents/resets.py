"""When a usage limit resets, read from the words an agent printed.

Claude Code says when a subscription's limit resets in several forms, and an
older CLI only gave an epoch after a bar:

    Claude AI usage limit reached|1753441200
    You've hit your 5-hour limit · resets 8:10am (UTC)
    You've hit your weekly limit · resets Jul 15 at 12am (Australia/Melbourne)
    You're out of extra usage · resets 11:30am (Asia/Colombo)

A time of day names the next such moment in the zone in brackets (the
machine's own zone when there is none): today if it is still to come,
otherwise tomorrow. A date without a year is the next such date. Other
agents' "try again in 2 hours 5 minutes" is read too, so a command agent's
`limit_pattern` can point at it.

Pure: `now` is given (epoch seconds), zones come from zoneinfo, and anything
unreadable gives None (the caller backs off instead).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.I)
_RESETS = re.compile(
    r"\bresets?\s+(?:at\s+)?"
    r"(?:(?P<month>[A-Za-z]{3,9})\.?\s+(?P<day>\d{1,2})(?:,?\s+(?P<year>\d{4}))?\s*(?:at\s+|,\s*)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?"
    r"(?:\s*\((?P<zone>[A-Za-z_+\-/0-9]+)\))?",
    re.I)
_IN = re.compile(r"\b(?:try again|resets?|retry)\s+in\s+(?P<span>(?:\d+\s*[a-z]+[\s,]*(?:and\s+)?)+)",
                 re.I)
_UNIT = re.compile(r"(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}


def zone(name: str | None) -> tzinfo | None:
    """The zone a bracket names (UTC, Europe/Paris), None when it names none known."""
    if not name:
        return None
    if name.upper() in ("UTC", "GMT", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def reset_time(text: str, now: float, local: tzinfo | None = None) -> float | None:
    """The epoch second `text` says a limit resets at, or None.

    `local` is the zone for a time given without one (default: the machine's)."""
    if not text:
        return None
    m = _EPOCH.search(text)
    if m:
        return float(m.group(1))
    m = _RESETS.search(text)
    if m and (m.group("ampm") or m.group("minute") or m.group("month")):
        return _clock_time(m, now, local)
    m = _IN.search(text)
    if m:
        seconds = _span(m.group("span"))
        if seconds:
            return now + seconds
    return None


def _clock_time(m: re.Match[str], now: float, local: tzinfo | None) -> float | None:
    tz = zone(m.group("zone")) if m.group("zone") else None
    if tz is None:
        tz = local or datetime.now().astimezone().tzinfo or timezone.utc
    hour, minute = int(m.group("hour")), int(m.group("minute") or 0)
    ampm = (m.group("ampm") or "").lower().replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    current = datetime.fromtimestamp(now, tz)
    at = time(hour, minute)
    if m.group("month"):
        month = _MONTHS.get(m.group("month")[:3].lower())
        if month is None:
            return None
        day = int(m.group("day"))
        year = int(m.group("year")) if m.group("year") else current.year
        for y in ((year,) if m.group("year") else (year, year + 1)):
            try:
                moment = _at(date(y, month, day), at, tz)
            except ValueError:
                return None
            if m.group("year") or moment.timestamp() > now:
                return moment.timestamp()
        return None
    moment = _at(current.date(), at, tz)
    if moment.timestamp() <= now:
        moment = _at(current.date() + timedelta(days=1), at, tz)
    return moment.timestamp()


def _at(day: date, at: time, tz: tzinfo) -> datetime:
    return datetime.combine(day, at, tzinfo=tz)


def _span(text: str) -> float:
    scale = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return float(sum(int(n) * scale[unit[0].lower()] for n, unit in _UNIT.findall(text)))
