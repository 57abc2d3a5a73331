"""One way to write a duration and a moment, for every output Owl makes.

The CLI, the tray menu and notifications all write time through here, so a
grace window reads "14m 59s left" everywhere and a Job's Run "started 14:05
(5m ago)" everywhere. Pure: the caller passes `now`; no clock is read here
except where a function says so by taking no `now` (never in a pure core).

Style:
- a duration: the two largest units, no zero tail: "45s", "9m 59s", "10m",
  "2h 5m", "2h", "1d 3h"; rounded to the second (a countdown never shows
  "0s" while time remains: it rounds up);
- a moment: the 24-hour local clock, "14:05", with the date in front when it
  is not today, "2026-11-30 14:05";
- a moment to come (a wait's end): "18:29" today, "Dec 3 18:29" within six
  days, "Apr 17 2054 18:29" further off, so a far date never reads as today;
- a moment relative to now: "just now", "45s ago", "5m ago", "2h 5m ago",
  "3d ago" (minutes are the finest unit past the first minute).
"""

from __future__ import annotations

import math
import re
import time

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from datetime import tzinfo

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
ISO = "%Y-%m-%dT%H:%M:%S"


def duration(seconds: float | None, *, coarse: bool = False, up: bool = False) -> str:
    """Seconds as "9m 59s" / "2h 5m". `coarse` drops seconds past a minute
    (rounding to the nearest minute); `up` rounds up (a countdown)."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "?"
    s = max(0.0, float(seconds))
    whole = math.ceil(s - 1e-9) if up else int(round(s))
    if coarse and whole >= 60:
        whole = (math.ceil(whole / 60) if up else int(round(whole / 60))) * 60
    if whole == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in _UNITS:
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
        elif parts:
            parts.append("")  # a skipped unit still counts as one of the two
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if p)


_SPELL = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_PARSE_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PARSE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse(text: str) -> float:
    """ "500ms", "90s", "10m", "1h30m" -> seconds: the config's spelling. Raises ValueError."""
    if not isinstance(text, str):
        raise ValueError('a duration is a string such as "90s" or "1h30m"')
    s = text.strip().replace(" ", "")
    if not s:
        raise ValueError("empty duration")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PARSE.match(s, pos)
        if not m:
            raise ValueError(f'not a duration: {text!r} (use e.g. "500ms", "90s", "10m", "1h30m")')
        total += float(m.group(1)) * _PARSE_UNITS[m.group(2)]
        pos = m.end()
    if not math.isfinite(total):
        raise ValueError(f"not a duration: {text!r}")
    return total


def spell(seconds: float) -> str:
    """Seconds -> the shortest text `parse` reads back ("15m", "1h30m", "500ms", "8d"):
    how a duration a person configures is written back to them, in the config,
    a bound's refusal or the reason a Run ended."""
    if seconds < 1 and seconds != int(seconds):
        return f"{round(seconds * 1000)}ms"
    whole = int(round(seconds))
    parts = []
    for unit, size in _SPELL:
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts) or "0s"


def countdown(seconds: float | None) -> str:
    """What is left of a window: never "0s" while any time remains."""
    return duration(seconds, up=True)


def ago(seconds: float | None) -> str:
    """How long ago, coarse: "just now", "45s ago", "5m ago", "2h 5m ago"."""
    if seconds is None:
        return "?"
    if seconds < 5:
        return "just now"
    if seconds < 60:
        return f"{int(seconds)}s ago"
    return f"{duration(seconds - seconds % 60, coarse=True)} ago"


def clock(ts: float | None, now: float) -> str:
    """A moment as the local 24-hour clock, dated when it is not today."""
    if ts is None:
        return "?"
    t, n = time.localtime(ts), time.localtime(now)
    if (t.tm_year, t.tm_yday) == (n.tm_year, n.tm_yday):
        return time.strftime("%H:%M", t)
    return time.strftime("%Y-%m-%d %H:%M", t)


FAR = 6 * 86400.0  # a moment further off than this is shown with its year
UNSHOWN = "a moment that cannot be shown"  # in words, where `ahead` says "?"


def ahead(ts: float | None, now: float, tz: tzinfo | None = None) -> str:
    """A moment to come: "18:29", "Dec 3 18:29", "Apr 17 2054 18:29" (see the
    module docstring); "?" for one no calendar holds. `tz`: the zone to show it
    in (default: the machine's)."""
    if ts is None or not math.isfinite(ts):
        return "?"
    try:
        from datetime import datetime  # here: `owl jobs` and `owl status` go without

        t = datetime.fromtimestamp(ts, tz) if tz is not None else datetime.fromtimestamp(ts)
        n = datetime.fromtimestamp(now, tz) if tz is not None else datetime.fromtimestamp(now)
    except (ValueError, OverflowError, OSError):
        return "?"
    hm = f"{t:%H:%M}"
    if t.date() == n.date():
        return hm
    if ts - now <= FAR and ts >= now:
        return f"{t:%b} {t.day} {hm}"
    return f"{t:%b} {t.day} {t.year} {hm}"


def moment(ts: float | None, now: float) -> str:
    """A past moment both ways: "14:05 (5m ago)"."""
    if ts is None:
        return "?"
    return f"{clock(ts, now)} ({ago(now - ts)})"


_ISO_PARTS = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})T([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
)


def parse_iso(text: str | None) -> float | None:
    """The local "YYYY-MM-DDTHH:MM:SS" of `owl ... --json` back to epoch seconds.

    Read by hand rather than with `time.strptime`, which imports `_strptime`
    (calendar, locale and its own patterns): `owl jobs` reads one a Job, and
    that import cost it more than the rest of its table. It takes what
    strptime's ISO takes, and refuses a field out of range or a day its month
    does not have."""
    m = _ISO_PARTS.fullmatch(text[:19]) if text else None
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups())
    if not (
        year >= 1
        and 1 <= month <= 12
        and 1 <= day <= _days_in(year, month)
        and hour <= 23
        and minute <= 59
        and second <= 61
    ):
        return None
    try:
        return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (ValueError, OverflowError):
        return None


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31
