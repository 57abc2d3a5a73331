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
unreadable gives None (the caller backs off instead). Nothing an agent prints
makes these raise, whatever its size: "try again in 3000000 days" is read as
what it says (far past any real limit, so `jobrules` backs off instead), a
span too long to count is read as one that never ends, and a date no calendar
holds is None. `reset_words` gives the words a moment was read from, for the
log.
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
    re.I,
)
_IN = re.compile(
    r"\b(?:try again|resets?|retry)\s+in\s+(?P<span>(?:\d+\s*[a-z]+[\s,]*(?:and\s+)?)+)", re.I
)
_UNIT = re.compile(r"(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b", re.I)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}


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


LONGEST = 1e15  # seconds: a span past this (30 million years) is counted as this
WORDS = 160  # how much of the words a moment was read from is kept


def reset_time(text: str, now: float, local: tzinfo | None = None) -> float | None:
    """The epoch second `text` says a limit resets at, or None; never raises.

    `local` is the zone for a time given without one (default: the machine's)."""
    return _read(text, now, local)[0]


def reset_words(text: str) -> str | None:
    """The words in `text` a reset moment is read from ("try again in 3 hours"),
    cut short, or None when it holds none."""
    return _read(text, 0.0, timezone.utc)[1]


def _read(text: str, now: float, local: tzinfo | None) -> tuple[float | None, str | None]:
    """(the moment, the words it was read from); a moment no calendar holds is
    (None, the words)."""
    if not text or not isinstance(text, str):
        return None, None
    try:
        m = _EPOCH.search(text)
        if m:
            return float(m.group(1)), m.group(0)
        m = _RESETS.search(text)
        if m and (m.group("ampm") or m.group("minute") or m.group("month")):
            words = m.group(0)[:WORDS].strip()
            try:
                return _clock_time(m, now, local), words
            except (ValueError, OverflowError, OSError):
                return None, words
        m = _IN.search(text)
        if m:
            seconds = _span(m.group("span"))
            if seconds:
                return now + seconds, m.group(0)[:WORDS].strip()
    except (ValueError, OverflowError, OSError, RecursionError):
        pass
    return None, None


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
        for y in (year,) if m.group("year") else (year, year + 1):
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
    """The seconds "2 hours 5 minutes" says, at most LONGEST ("99999…9 days" too)."""
    scale = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    total = 0
    for n, unit in _UNIT.findall(text):
        if len(n) > 20:
            return LONGEST
        total += int(n) * scale[unit[0].lower()]
    return float(min(total, int(LONGEST)))


# ------------------------------------------------- Codex's and Gemini's words
#
# Codex CLI 0.171 (its usage-limit error, the machine's own zone):
#     You've hit your usage limit. ... or try again at 7:57 PM.
#     You've hit your usage limit. ... Try again at Dec 4th, 2026 6:27 PM.
# Gemini CLI 0.61 (the API's words, passed on):
#     ... Please retry in 3596s. Suggested retry after 3596s.
#     ... Please retry in 56.639749873s.
#     Your quota will reset after 1h49m8s.
# Kept apart from `reset_time` (which Claude's words go through) so each
# form is one small reader; `reset_moment` tries them, then `reset_time`.

SPAN_MAX = 400 * 86400.0  # a reset further away than this is no reset moment
TEXT_MAX = 8192  # only this much of a message is searched

_TRY_AT = re.compile(
    r"\btry again (?:at|on)\s+"
    r"(?:(?P<month>[A-Za-z]{3,9})\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?"
    r"(?:\s*\((?P<zone>[A-Za-z_+\-/0-9]+)\))?",
    re.I,
)
_AFTER = re.compile(
    r"\b(?:retry|try again|reset|resets)\s+(?:in|after)\s+"
    r"(?P<span>(?:\d{1,9}(?:\.\d{1,12})?\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|"
    r"seconds?|secs?|s)\b\s*,?\s*(?:and\s+)?){1,6})",
    re.I,
)
_COMPACT = re.compile(
    r"\b(?:retry|try again|reset|resets)\s+(?:in|after)\s+"
    r"(?P<span>(?:\d{1,9}(?:\.\d{1,12})?(?:d|h|m|s)){1,4})(?![A-Za-z0-9])",
    re.I,
)
_PART = re.compile(r"(\d{1,9}(?:\.\d{1,12})?)\s*([a-z]+)", re.I)
_SCALE = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def retry_after(text: str, now: float) -> float | None:
    """The moment "retry in 3596s" / "reset after 1h49m8s" / "try again in
    2 hours" names, counted from `now`; None when it names none (or an
    absurd one). Never raises."""
    try:
        text = (text or "")[:TEXT_MAX]
        for pattern in (_COMPACT, _AFTER):
            m = pattern.search(text)
            if m:
                seconds = _parts(m.group("span"))
                if seconds is not None and 0 < seconds <= SPAN_MAX:
                    return now + seconds
        return None
    except (ValueError, OverflowError, TypeError):
        return None


def try_again_at(text: str, now: float, local: tzinfo | None = None) -> float | None:
    """The moment Codex's "try again at 7:57 PM." / "Try again at Dec 4th, 2026
    6:27 PM." names (the machine's zone unless it names one); never raises."""
    try:
        m = _TRY_AT.search((text or "")[:TEXT_MAX])
        if not m or not (m.group("ampm") or m.group("minute")):
            return None
        moment = _clock_time(m, now, local)
    except (ValueError, OverflowError, TypeError, OSError, KeyError):
        return None
    if moment is None or not now < moment <= now + SPAN_MAX:
        return None
    return moment


def reset_moment(text: str, now: float, local: tzinfo | None = None) -> float | None:
    """Any reset moment in `text`: Codex's and Gemini's forms, then Claude's
    (`reset_time`). Bounded and total: None for anything it cannot read."""
    text = (text or "")[:TEXT_MAX]
    for read in (lambda: try_again_at(text, now, local), lambda: retry_after(text, now)):
        got = read()
        if got is not None:
            return got
    try:
        got = reset_time(text, now, local)
    except (ValueError, OverflowError, TypeError, OSError, KeyError):
        return None
    if got is None or not now < got <= now + SPAN_MAX:
        return None
    return got


def _parts(span: str) -> float | None:
    total = 0.0
    for number, unit in _PART.findall(span):
        if unit.lower().startswith("mo"):
            return None  # months are not a span read here
        scale = _SCALE.get(unit[0].lower())
        if scale is None:
            return None
        total += float(number) * scale
    return total
