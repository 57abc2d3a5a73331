"""What unattended work may spend: the headroom kept in each usage window, and the money caps.

Theory of operation
-------------------

A subscription's agent reports how much of each usage window is used (Claude
Code's `rate_limit_event`: the five-hour and seven-day windows, with when each
resets; Codex's rate-limit snapshot: its primary and secondary windows). An
API key's agent reports what a Run cost in dollars, or only in tokens. Only
Owl knows whether the person is at the machine, so only Owl can spend the
windows at night and keep some for the day:

- Headroom (`budget.keep_five_hour`, `budget.keep_seven_day`: the share kept
  for the person). Once an agent's latest reading of a window reaches the line
  (keep 20%: 0.80 used), no Run of that agent starts before the window resets
  (`window_hold`), and a live Run of it is ended as an interruption, unless
  `budget.finish_run` lets it finish. A later reading under the line (after
  the reset) lets work go on; a reading whose reset has passed holds nothing.
  A Shift started with `--spend` ignores the headroom.
- Money (`budget.daily_usd`, `budget.run_usd`; `budget.daily_tokens`,
  `budget.run_tokens` for an agent that reports only tokens). A Run over a
  `run_*` cap failed its bound (`run_over`: an attempt spent); once the day's
  total reaches a `daily_*` cap no Run starts before local midnight
  (`day_hold`). A Shift's `--spend` does not lift a money cap: that is the
  person's own ceiling. On a subscription the dollars are the agent's
  API-equivalent, not a bill (`owl.rules.money`): the caps limit that figure,
  and their words say so.

Every number comes from an agent's output, so it is hostile data: a reading
outside sane bounds (`insane`: utilization below 0 or above 1.5, a reset
already past or more than `MAX_RESET` away, a cost below 0) is never acted on.

Pure: no clock (`now` is given, epoch seconds, and the zone to show times in),
no store, no processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from owl.rules import money, timefmt

FIVE_HOUR = "five_hour"
SEVEN_DAY = "seven_day"
WINDOWS = (FIVE_HOUR, SEVEN_DAY)
WINDOW_WORDS = {FIVE_HOUR: "five-hour window", SEVEN_DAY: "seven-day window"}
SHORT_WORDS = {FIVE_HOUR: "five-hour", SEVEN_DAY: "seven-day"}
KEEP_KEYS = {FIVE_HOUR: "keep_five_hour", SEVEN_DAY: "keep_seven_day"}

# The defaults, and why: the seven-day window is the one whose loss costs the
# person days (used up on Thursday night, refused until Monday), so more of it
# is kept; a fifth of the five-hour window is about an hour of a person's own
# work at a usual pace, and that window comes back within five hours anyway.
KEEP_FIVE_HOUR = 0.20
KEEP_SEVEN_DAY = 0.30

MAX_USED = 1.5  # a utilization above this is no reading (a window can run over a little)
MAX_RESET = 8 * 86400.0  # a reset further off than this is no reading: no window is longer
MAX_COST = 1e6  # dollars one Run could cost: past this the report is not believed
HOLD_KIND = "budget"  # the kind of an agent's wait the headroom sets (Wait.kind "budget:five_hour")


@dataclass(frozen=True)
class Reading:
    """One window as an agent reported it: the share used (1.0 = all of it) and
    the epoch second it resets, `seen` when Owl read it."""

    window: str  # FIVE_HOUR | SEVEN_DAY
    used: float
    resets_at: float
    seen: float = 0.0


@dataclass(frozen=True)
class Caps:
    """The `[budget]` section, as fractions kept and plain numbers (None: no cap)."""

    keep_five_hour: float = KEEP_FIVE_HOUR
    keep_seven_day: float = KEEP_SEVEN_DAY
    daily_usd: float | None = None
    run_usd: float | None = None
    daily_tokens: int | None = None
    run_tokens: int | None = None
    finish_run: bool = False

    def keep(self, window: str) -> float:
        return self.keep_five_hour if window == FIVE_HOUR else self.keep_seven_day

    def line(self, window: str) -> float:
        """The utilization at which work stops: 0.80 when 20% is kept."""
        return 1.0 - self.keep(window)


@dataclass(frozen=True)
class Spent:
    """What Runs spent: dollars (as the agents reported them) and tokens.

    Of `usd`, `billed` is what agents said is a bill (an API key's) and
    `unbilled` what they said is not (a subscription's API-equivalent,
    `owl.rules.money`); the caps count all of `usd` either way."""

    usd: float = 0.0
    tokens: int = 0
    billed: float = 0.0
    unbilled: float = 0.0

    def plus(self, other: Spent) -> Spent:
        return Spent(
            self.usd + other.usd,
            self.tokens + other.tokens,
            self.billed + other.billed,
            self.unbilled + other.unbilled,
        )


@dataclass(frozen=True)
class Hold:
    """No Run (of `agent`, or of any agent when it is None) starts before `until`."""

    agent: str | None
    kind: str  # "budget:five_hour", "budget:daily_usd", ...
    until: float
    reason: str


# ------------------------------------------------------------------ readings


def real(value: object) -> float | None:
    """`value` as a finite float, or None (a bool, NaN, an infinity, an integer
    too large for a float, anything that is not a number): the one test every
    number an agent or a store hands the rules passes."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def insane(reading: Reading, now: float) -> str | None:
    """Why a reading is not believed, or None when it is within sane bounds."""
    if reading.window not in WINDOWS:
        return f"an unknown window {reading.window!r}"
    used, reset = real(reading.used), real(reading.resets_at)
    if used is None or not 0.0 <= used <= MAX_USED:
        return f"a utilization of {reading.used!r}, not between 0 and {MAX_USED:g}"
    if reset is None or reset <= now:
        return f"a reset at {reading.resets_at!r}, which is not to come"
    if reset > now + MAX_RESET:
        return f"a reset at {reading.resets_at!r}, more than 8 days away"
    return None


def cost_insane(usd: object) -> str | None:
    """Why a Run's reported cost is not believed, or None."""
    v = real(usd)
    if v is None or not 0.0 <= v <= MAX_COST:
        return f"a cost of {usd!r}, not between $0 and ${MAX_COST:,.0f}"
    return None


def latest(readings: Iterable[Reading]) -> dict[str, Reading]:
    """The newest reading of each window."""
    out: dict[str, Reading] = {}
    for r in readings:
        have = out.get(r.window)
        if have is None or r.seen >= have.seen:
            out[r.window] = r
    return out


# -------------------------------------------------------------------- rules


def over_line(reading: Reading, caps: Caps, now: float) -> bool:
    """Whether the reading reaches its window's line, and the window is yet to reset."""
    return reading.resets_at > now and reading.used >= caps.line(reading.window) - 1e-9


def window_hold(
    agent: str,
    readings: Iterable[Reading],
    caps: Caps,
    now: float,
    tz: tzinfo | None = None,
    *,
    spend: bool = False,
) -> Hold | None:
    """The hold the agent's windows put on it now: until the latest reset of
    the windows over their lines (all of them must come back), or None.
    `spend`: a Shift that spends the headroom; nothing is held."""
    if spend:
        return None
    over = [r for r in latest(readings).values() if over_line(r, caps, now)]
    if not over:
        return None
    last = max(over, key=lambda r: r.resets_at)
    words = hold_words(agent, last, caps, tz)
    return Hold(agent, f"{HOLD_KIND}:{last.window}", last.resets_at, words)


def hold_words(agent: str, r: Reading, caps: Caps, tz: tzinfo | None = None) -> str:
    """'claude: keeping 20% of your five-hour window for you — 85% used, resets 21:40'."""
    return (
        f"{agent}: keeping {percent(caps.keep(r.window))} of your {WINDOW_WORDS[r.window]} "
        f"for you — {percent(r.used)} used, resets {clock(r.resets_at, r.seen, tz)}"
    )


def day_start(now: float, tz: tzinfo | None = None) -> float:
    """The epoch second the local day of `now` began."""
    t = datetime.fromtimestamp(now, tz)
    return t.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_midnight(now: float, tz: tzinfo | None = None) -> float:
    """The epoch second of the next local midnight (the day turns: daily caps reset)."""
    t = datetime.fromtimestamp(now, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    nxt = t + timedelta(days=1)
    if tz is None:  # local time: the calendar's next midnight, whatever the clocks did
        nxt = datetime(nxt.year, nxt.month, nxt.day)
    return nxt.timestamp()


def day_hold(spent: Spent, caps: Caps, now: float, tz: tzinfo | None = None) -> Hold | None:
    """The queue's hold once the day's total reaches a daily cap: until midnight."""
    why = None
    if caps.daily_usd is not None and spent.usd >= caps.daily_usd:
        why = (
            f"today's {money.said_total(spent.usd, spent.unbilled)} reached"
            f" budget.daily_usd (${caps.daily_usd:.2f})"
        )
        kind = "daily_usd"
    elif caps.daily_tokens is not None and spent.tokens >= caps.daily_tokens:
        why = f"today's {spent.tokens:,} tokens reached budget.daily_tokens ({caps.daily_tokens:,})"
        kind = "daily_tokens"
    if why is None:
        return None
    return Hold(
        None, f"{HOLD_KIND}:{kind}", next_midnight(now, tz), f"{why}; work goes on at midnight"
    )


def run_over(spent: Spent, caps: Caps) -> str | None:
    """Why a Run failed its bound (over `run_usd` or `run_tokens`), or None."""
    if caps.run_usd is not None and spent.usd > caps.run_usd:
        cost = money.said_total(spent.usd, spent.unbilled)
        return f"the Run cost {cost}, over budget.run_usd (${caps.run_usd:.2f})"
    if caps.run_tokens is not None and spent.tokens > caps.run_tokens:
        return f"the Run used {spent.tokens:,} tokens, over budget.run_tokens ({caps.run_tokens:,})"
    return None


def may_start(
    agent: str,
    readings: Mapping[str, Iterable[Reading]],
    caps: Caps,
    day: Spent,
    now: float,
    *,
    present: bool,
    spend: bool = False,
) -> tuple[bool, str | None]:
    """Whether a Run of `agent` may start now, and if not why: the whole rule
    in one place (the engine applies its parts where each belongs). Nothing
    starts while the person is present; then the day's money; then the
    agent's windows (which a spending Shift ignores)."""
    if present:
        return False, "the person is at the machine"
    held = day_hold(day, caps, now)
    if held is not None:
        return False, held.reason
    w = window_hold(agent, readings.get(agent, ()), caps, now, spend=spend)
    return (False, w.reason) if w is not None else (True, None)


# ------------------------------------------------------------------- words


def percent(share: float) -> str:
    """0.85 -> '85%'."""
    return f"{round(share * 100):d}%"


def clock(at: float, now: float, tz: tzinfo | None = None) -> str:
    """'21:40' today, 'Dec 9 21:40' on another day: a window's reset as
    `owl status` shows every moment to come (`timefmt.ahead`)."""
    shown = timefmt.ahead(at, now, tz)
    return f"at {timefmt.UNSHOWN}" if shown == "?" else shown


def night_words(start: Mapping[str, float], end: Mapping[str, float]) -> list[str]:
    """'claude five-hour 40% → 78%, seven-day 31% → 44%': each agent's windows
    from the first reading of a spell (`start`, keyed 'agent window') to the last."""
    agents: dict[str, list[str]] = {}
    for key, last in sorted(end.items(), key=lambda kv: _order(kv[0])):
        agent, _, window = key.rpartition(" ")
        if window not in SHORT_WORDS:
            continue
        first = start.get(key, last)
        agents.setdefault(agent, []).append(
            f"{SHORT_WORDS[window]} {percent(first)} → {percent(last)}"
        )
    return [f"{a} " + ", ".join(ws) for a, ws in sorted(agents.items())]


def _order(key: str) -> tuple[str, int]:
    agent, _, window = key.rpartition(" ")
    return agent, WINDOWS.index(window) if window in WINDOWS else len(WINDOWS)
