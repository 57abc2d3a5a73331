"""The budget as the engine keeps it: the agents' windows, the day's spending, the holds.

The rules are `owl.rules.budget`'s; this module keeps what they are applied to
and carries out what they say, on the engine thread (takes the engine as `eng`):

- `heard`: readings of an agent's windows (from a live Run's meter, or its
  report at the end). Each is checked (`budget.insane`: logged and dropped),
  kept (and stored, so a restarted daemon keeps them), and the agent's hold
  worked out again (`settle`).
- `settle`: the headroom's hold is an agent's wait (`Wait.kind`
  "budget:five_hour"), so everything that holds an agent's Jobs for a usage
  limit holds them for this too (the fallback chain, `owl status`, `owl jobs
  show`, the tray, the notifications, `owl agents wake`). A reading under the
  line, or a Shift that spends, lifts it; a usage limit's own wait is never
  replaced. On a new hold the agent's live Runs are ended as interruptions,
  unless `budget.finish_run` (or the Run was started by `owl start`).
- `run_ended`: what a Run spent joins the day's total; a Run over `run_usd` /
  `run_tokens` failed its bound.
- `day_hold`: the queue's hold once the day's total reaches a daily cap, until
  local midnight (stored, so `owl jobs show` says it too).
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from owl.engine.state import State
    from owl.engine.live import Live
    from owl.store.db import Store

from owl.engine import telling
from owl.rules import budget, jobrules, money
from owl.rules.budget import Reading, Spent
from owl.rules.jobrules import Wait
from owl.rules.timefmt import ahead

log = logging.getLogger("owl.engine")

WINDOWS_SETTING = "budget_windows"  # agent -> window -> [used, resets_at, seen]
DAY_SETTING = "budget_day"  # the queue's hold for the day: {until, kind, reason}


@dataclass
class Books:
    """The latest sane reading of each agent's windows, and the day's total."""

    windows: dict[str, dict[str, Reading]] = field(default_factory=dict)
    day_start: float = 0.0
    today: Spent = field(default_factory=Spent)
    day_held: budget.Hold | None = None  # the queue's hold, once told


_KEPT: weakref.WeakKeyDictionary[Any, Books] = weakref.WeakKeyDictionary()


def books(eng: State) -> Books:
    """The engine's books, loaded from its store when first asked for."""
    kept = _KEPT.get(eng)
    if kept is None:
        kept = _KEPT[eng] = load(eng.store)
    return kept


def load(store: Store, now: float | None = None) -> Books:
    """The books as stored: readings whose reset is still to come, and the
    day's total from the Runs that ended today."""
    now = time.time() if now is None else now
    books = Books()
    raw = store.setting(WINDOWS_SETTING, {}) or {}
    for agent, windows in raw.items() if isinstance(raw, dict) else []:
        for window, v in windows.items() if isinstance(windows, dict) else []:
            try:
                r = Reading(str(window), float(v[0]), float(v[1]), float(v[2]))
            except (TypeError, ValueError, IndexError):
                continue
            if budget.insane(r, now) is None:
                books.windows.setdefault(str(agent), {})[r.window] = r
    roll_day(store, books, now, force=True)
    return books


def roll_day(store: Store, books: Books, now: float, force: bool = False) -> None:
    """A new local day: the total starts from what the store says of today."""
    start = budget.day_start(now)
    if not force and start == books.day_start:
        return
    books.day_start = start
    total = Spent()
    for text in store.usages_since(start):
        try:
            usage = json.loads(text)
        except ValueError:
            continue
        total = total.plus(spent_of(usage if isinstance(usage, dict) else {}))
    books.today = total


def spent_of(usage: dict[str, Any] | None) -> Spent:
    """What one Run's recorded usage says it spent; a cost out of bounds counts nothing."""
    u = usage or {}
    usd = budget.real(u.get("total_cost_usd"))
    tokens = 0
    for key in ("input_tokens", "output_tokens"):
        n = budget.real(u.get(key))
        if n is not None and 0 <= n < 2**53:
            tokens += int(n)
    usd = usd if usd is not None and budget.cost_insane(usd) is None else 0.0
    billed = money.billed_of(u)
    return Spent(usd, tokens, usd if billed else 0.0, usd if billed is False else 0.0)


def spending(eng: State) -> bool:
    """A Shift started `--spend` is on: the headroom is not kept."""
    return eng.shift is not None and eng.shift.spend


# ------------------------------------------------------------------ windows


def heard(eng: State, agent: str, readings: list[Reading], now: float | None = None) -> None:
    """Readings of `agent`'s windows: believed if sane, kept, and acted on."""
    if not readings:
        return
    now = time.time() if now is None else now
    mine = books(eng).windows.setdefault(agent, {})
    changed = False
    for r in readings:
        why = budget.insane(r, now)
        if why is not None:
            log.warning("%s reported %s for its %s; ignored", agent, why, r.window)
            continue
        old = mine.get(r.window)
        if old is not None and old.seen > r.seen:
            continue
        mine[r.window] = r
        if old is None or (old.used, old.resets_at) != (r.used, r.resets_at):
            changed = True
            telling.window(eng, agent, r)
    if changed:
        store_windows(eng)
    settle(eng, agent, now)


def store_windows(eng: State) -> None:
    data = {
        a: {w: [r.used, r.resets_at, r.seen] for w, r in ws.items()}
        for a, ws in books(eng).windows.items()
    }
    try:
        eng.store.set_setting(WINDOWS_SETTING, data)
    except Exception as e:  # a full disk: the readings stay in memory
        log.warning("the agents' windows could not be recorded: %s", e)


def settle(eng: State, agent: str, now: float | None = None) -> None:
    """Set or lift `agent`'s headroom hold from its latest readings."""
    now = time.time() if now is None else now
    caps = eng.cfg.budget
    readings = books(eng).windows.get(agent, {}).values()
    hold = budget.window_hold(agent, readings, caps, now, spend=spending(eng))
    have = eng.waits.get(agent)
    ours = have is not None and have.kind.startswith(budget.HOLD_KIND + ":")
    if hold is None:
        if ours:
            eng.store.clear_limit(agent)
            eng.waits.pop(agent, None)
            log.info("%s: its windows are under the line kept for you; its Jobs go on", agent)
        return
    if have is not None and not ours and jobrules.waiting(have, now):
        return  # a usage limit holds it already, as long or longer
    if not (ours and have is not None and (have.until, have.reason) == (hold.until, hold.reason)):
        wait = Wait(agent, hold.kind, hold.until, hold.reason, 0)
        eng.store.set_limit(agent, wait.kind, wait.until, wait.reason, 0, now=now)
        eng.waits[agent] = wait
        log.info("%s waits until %s: %s", agent, ahead(hold.until, now), hold.reason)
        telling.limit_wait(eng, wait)
    end_live(eng, agent, hold.reason)


def forget(eng: State, agent: str) -> None:
    """`owl agents wake` ended the agent's hold: its readings are dropped, so
    that the next one it gives decides, not the one the person just overrode."""
    if books(eng).windows.pop(agent, None) is not None:
        store_windows(eng)


def settle_all(eng: State) -> None:
    """Every agent's hold again: a Shift began or ended, the config changed."""
    agents = set(books(eng).windows) | {
        a for a, w in eng.waits.items() if w.kind.startswith(budget.HOLD_KIND + ":")
    }
    for agent in sorted(agents):
        settle(eng, agent)


def end_live(eng: State, agent: str, reason: str) -> None:
    """End the agent's live Runs as interruptions (no attempt spent, worktree
    and conversation kept); not with `budget.finish_run`, nor a Run the person
    started with `owl start`."""
    if eng.cfg.budget.finish_run:
        return
    for lv in list(eng.live.values()):
        if getattr(lv.driver, "name", None) != agent or lv.exempt:
            continue
        r = eng.core.runs.get(lv.run_id)
        if r is None or r.phase.value == "ending":
            continue
        log.info("run %s: ended to keep the headroom: %s", lv.run_id, reason)
        eng.do(eng.core.end(lv.run_id, eng.clock(), reason))


def watch(eng: State, lv: Live) -> None:
    """At each watch: what the Run's live meter read since the last."""
    if lv.meter is None:
        return
    readings = lv.meter.take()
    if readings:
        heard(eng, getattr(lv.driver, "name", "") or "", readings)


# -------------------------------------------------------------------- money


def run_ended(eng: State, lv: Live, verdict: jobrules.Verdict) -> jobrules.Verdict:
    """After a Run's end was judged: its windows heard, its spending counted,
    and its own caps applied (over one, it failed its bound)."""
    now = time.time()
    agent = getattr(lv.driver, "name", "") or ""
    report = lv.report
    if report is not None:
        heard(eng, agent, list(report.windows), now)
    settle(eng, agent, now)  # its end may have lifted a hold the readings still call for
    if report is not None:
        cost = (report.usage or {}).get("total_cost_usd")
        if cost is not None and budget.cost_insane(cost):
            log.warning(
                "run %s: %s reported %s; not counted", lv.run_id, agent, budget.cost_insane(cost)
            )
    usage = (eng.store.run(lv.run_id) or {}).get("usage")  # the Run's own, as recorded
    spent = spent_of(usage if isinstance(usage, dict) else None)
    roll_day(eng.store, books(eng), now)
    books(eng).today = books(eng).today.plus(spent)
    over = budget.run_over(spent, eng.cfg.budget)
    if over is None or verdict.outcome == "failed":
        return verdict
    log.info("run %s failed its bound: %s", lv.run_id, over)
    return jobrules.Verdict("failed", over, verdict.wait, clear=verdict.clear)


def day_hold(eng: State, now: float | None = None) -> budget.Hold | None:
    """The queue's hold for the day, if the day's total reached a daily cap
    (said once as it begins, stored for the views); None otherwise."""
    now = time.time() if now is None else now
    roll_day(eng.store, books(eng), now)
    hold = budget.day_hold(books(eng).today, eng.cfg.budget, now)
    if hold is not None:  # the engine looks again as the day turns
        eng.recheck_at = min(eng.recheck_at, eng.clock() + max(0.05, hold.until - now + 0.05))
    was = books(eng).day_held
    if (hold is None) != (was is None) or (hold and was and hold.until != was.until):
        books(eng).day_held = hold
        try:
            eng.store.set_setting(
                DAY_SETTING,
                None
                if hold is None
                else {"until": hold.until, "kind": hold.kind, "reason": hold.reason},
            )
        except Exception as e:
            log.warning("the day's budget hold could not be recorded: %s", e)
        if hold is not None:
            log.info("no Run starts before %s: %s", ahead(hold.until, now), hold.reason)
            telling.limit_wait(eng, Wait("budget", hold.kind, hold.until, hold.reason, 0))
        else:
            log.info("the day's budget holds no more; work goes on")
    return hold


def view(eng: State, now: float | None = None) -> dict[str, Any]:
    """The budget as `owl status --json` gives it."""
    now = time.time() if now is None else now
    caps = eng.cfg.budget
    windows = []
    for agent, ws in sorted(books(eng).windows.items()):
        for window in budget.WINDOWS:
            r = ws.get(window)
            if r is None or r.resets_at <= now:
                continue
            windows.append(
                {
                    "agent": agent,
                    "window": window,
                    "used": round(r.used, 4),
                    "line": round(caps.line(window), 4),
                    "over": budget.over_line(r, caps, now),
                    "resets_at": round(r.resets_at, 3),
                    "resets_text": ahead(r.resets_at, now),
                    "seen": round(r.seen, 3),
                }
            )
    held = books(eng).day_held
    today = books(eng).today
    return {
        "today": {
            "usd": round(today.usd, 4),
            # what of it is a bill (an API key's) and what a subscription's
            # API-equivalent, not billed; the caps limit `usd`, all of it
            "billed_usd": round(today.billed, 4),
            "api_equivalent_usd": round(today.unbilled, 4),
            "cost_kind": money.total_kind(today.usd, today.billed, today.unbilled),
            "billed": money.total_billed(today.usd, today.billed, today.unbilled),
            "tokens": today.tokens,
            "since": round(books(eng).day_start, 3),
        },
        "caps": {
            "keep_five_hour": caps.keep_five_hour,
            "keep_seven_day": caps.keep_seven_day,
            "daily_usd": caps.daily_usd,
            "run_usd": caps.run_usd,
            "daily_tokens": caps.daily_tokens,
            "run_tokens": caps.run_tokens,
            "finish_run": caps.finish_run,
        },
        "windows": windows,
        "held": None
        if held is None or held.until <= now
        else {
            "kind": held.kind,
            "until_epoch": round(held.until, 3),
            "until_text": ahead(held.until, now),
            "reason": held.reason,
        },
        "spend": spending(eng),
    }
