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
- a moment relative to now: "just now", "45s ago", "5m ago", "2h 5m ago",
  "3d ago" (minutes are the finest unit past the first minute).
"""

from __future__ import annotations

import math
import time

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
            parts.append("")          # a skipped unit still counts as one of the two
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if p)


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


def moment(ts: float | None, now: float) -> str:
    """A past moment both ways: "14:05 (5m ago)"."""
    if ts is None:
        return "?"
    return f"{clock(ts, now)} ({ago(now - ts)})"


def parse_iso(text: str | None) -> float | None:
    """The local "YYYY-MM-DDTHH:MM:SS" of `owl ... --json` back to epoch seconds."""
    if not text:
        return None
    try:
        return time.mktime(time.strptime(text[:19], ISO))
    except (ValueError, OverflowError):
        return None
