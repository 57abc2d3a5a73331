"""What goes to the person's channels, and when: the rules, with no clock and no I/O.

Given the events and the moments (`now`, epoch seconds, and `minute`, the local
minute of the day, which the caller reads), the `Router` says which messages
to send. Tested with a fake clock:

- Present: nothing goes out (the desktop shows it); what happened is still
  remembered, so it is not sent later either.
- Away: a Job ready for review, blocked or out of attempts; an agent waiting on
  a usage limit for longer than `limit_after`; a process Owl may not signal; a
  full disk; Runs that cannot be contained (their Jobs wait), once a spell; a
  Run stopped (or held, by the disk floor) at one of its caps.
- At most one message per Job per change of state (a Job in review is told
  once, however often it is seen there; each Run that brings it back to
  review, blocked or exhausted, after a reply, a retry or `owl jobs verify`,
  is a new change, told as the first was).
- The reply hint ("Reply '4 accept', ...") only where a reply channel listens.
- What comes within `batch` of the first goes as one digest.
- Inside the quiet hours only the urgent kinds go; the rest wait for the quiet
  to end (and are dropped if the person came back meanwhile: the briefing has them).
- Coming back ends the spell: what waits is dropped, and the spell's summary
  becomes the briefing when anything happened in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from owl import textsafe
from owl.notify import events as ev
from owl.notify.briefing import Spell, spent
from owl.rules import money

TEXT_MAX = 200  # agent-written text in a message is cut here
QUIET_LOOK = 60.0  # while something waits out the quiet: look again this often


@dataclass(frozen=True)
class Rules:
    batch: float = 60.0
    limit_after: float = 3600.0
    quiet: tuple[int, int] | None = None  # (start, end) minutes of the day
    urgent: frozenset[str] = frozenset({"blocked"})
    replies: bool = False  # a reply channel listens: messages may say what to answer


@dataclass(frozen=True)
class Item:
    """One thing to tell: its kind (events.KINDS), its Job, a title and a body."""

    kind: str
    title: str
    body: str
    job_id: int | None = None


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    items: tuple[Item, ...]


def in_quiet(minute: int, quiet: tuple[int, int] | None) -> bool:
    """Whether the local `minute` of the day is inside the window (which may wrap midnight)."""
    if quiet is None:
        return False
    start, end = quiet
    if start == end:
        return False
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


def cut(text: str | None, limit: int = TEXT_MAX) -> str:
    """Agent text for a message: its first line, controls made visible, cut to `limit`."""
    first = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    line = textsafe.line(first.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def last_line(text: str | None, limit: int = TEXT_MAX) -> str:
    """Agent text's last non-blank line, made safe and cut (a command agent's
    output ends with what it did)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return cut(lines[-1], limit) if lines else ""


def said_last(e: ev.RunEnded, stamp: ev.Stamp) -> str:
    """What the agent said last: its final message's first line, or else its
    log's last line (read off the engine thread into `stamp.extra`)."""
    return cut(e.last_message) or last_line(stamp.extra.get("log_tail"))


def item_for(stamp: ev.Stamp, limit_after: float, replies: bool = False) -> Item | None:
    """What one event tells the person, or None when it is not news for a channel.
    `replies`: a reply channel listens, so the message says what may be answered."""
    e = stamp.event
    if isinstance(e, ev.RunEnded):
        title = cut(e.title, 80)
        said = said_last(e, stamp)
        if e.state == "review":
            lines = [title]
            if stamp.extra.get("diffstat"):
                lines.append(cut(stamp.extra["diffstat"]))
            if said:
                lines.append(f"“{said}”")
            if e.checks:
                lines.append(
                    "checks: "
                    + ", ".join(
                        f"{cut(n, 40)} {'passed' if ok else 'failed'}" for n, ok in e.checks
                    )
                )
            if e.cost:
                lines.append(money.said(e.cost, e.billed))
            if replies:
                lines.append(
                    f"Reply '{e.job_id} accept', '{e.job_id} drop' or "
                    f"'{e.job_id} <what to change>'."
                )
            return Item("review", f"Job {e.job_id} ready for review", "\n".join(lines), e.job_id)
        if e.state in ("blocked", "exhausted"):
            word = "blocked" if e.state == "blocked" else "out of attempts"
            lines = [title, f"Why: {cut(e.reason) or 'not said'}"]
            if said:
                lines.append(f"The agent's last line: “{said}”")
            if replies:
                lines.append(
                    f"What would help: reply '{e.job_id} <what to do>' to send it back with "
                    f"your words, or '{e.job_id} drop'."
                )
            else:
                lines.append(
                    f"What would help: owl jobs reply {e.job_id} '<what to do>' sends it back "
                    f"with your words; owl jobs drop {e.job_id} drops it."
                )
            return Item(e.state, f"Job {e.job_id} {word}", "\n".join(lines), e.job_id)
        return None
    if isinstance(e, ev.LimitWait):
        if e.until - e.since <= limit_after:
            return None
        hhmm = stamp.extra.get("until_hhmm") or ""
        if e.kind.startswith("budget:"):  # the headroom kept, or the day's money
            return Item(
                "limit",
                cut(e.reason, 120),
                f"Work waits until {hhmm}; its Jobs keep their places and carry on by "
                "themselves then.",
            )
        return Item(
            "limit",
            f"{cut(e.agent, 40)} waits until {hhmm}".strip(),
            f"{cut(e.reason)}\nIts Jobs keep their places and carry on by themselves then.",
        )
    if isinstance(e, ev.Untouchable):
        return Item(
            "untouchable",
            f"Job {e.job_id} left a process Owl may not stop",
            f"pid {e.pid} ({cut(e.command, 60)}): {cut(e.why)}",
            e.job_id,
        )
    if isinstance(e, ev.Uncontained):
        return Item(
            "sandbox",
            "Runs cannot be contained",
            f"{cut(e.problem, 400)}\nThe Jobs wait, and start by themselves once it works.",
        )
    if isinstance(e, ev.CapStop):
        held = "disk_floor" in e.reason
        return Item(
            "cap",
            f"Job {e.job_id} {'held' if held else 'stopped'} at a cap",
            f"{cut(e.title, 60)}\n{cut(e.reason)}\n"
            + (
                "It goes on when there is room, or ends as its grace window closes; "
                "no attempt is spent."
                if held
                else "Its Job waits in the queue; no attempt is spent."
            ),
            e.job_id,
        )
    if isinstance(e, ev.DiskFull):
        return Item(
            "disk",
            "The disk is full",
            f"{cut(e.where)}: {cut(e.detail)}\nOwl goes on and writes its records when "
            "there is room.",
        )
    return None


def _key(stamp: ev.Stamp) -> tuple | None:
    e = stamp.event
    if isinstance(e, ev.LimitWait):
        return ("limit", e.agent, round(e.until))
    if isinstance(e, ev.Untouchable):
        return ("untouchable", e.run_id, e.pid)
    if isinstance(e, ev.CapStop):
        return ("cap", e.run_id)
    if isinstance(e, ev.DiskFull):
        return ("disk",)
    if isinstance(e, ev.Uncontained):
        return ("sandbox", e.problem)
    return None


def digest(items: list[Item]) -> Message:
    if len(items) == 1:
        it = items[0]
        return Message(f"Owl: {it.title}", it.body, (it,))
    body = "\n\n".join(f"{it.title}\n{it.body}" for it in items)
    return Message(f"Owl: {len(items)} things need you", body, tuple(items))


@dataclass
class Router:
    rules: Rules = field(default_factory=Rules)
    away: bool = False
    spell: Spell | None = None
    last_spell: tuple[Spell, float] | None = None  # the spell that ended, and when
    away_at: float | None = None  # when the person was found away (not `since`, back-dated)
    # Job -> (state, Run) last seen: a Run's end is a change of state of its own
    # (the Job left review, blocked or exhausted to have it: a reply, a retry),
    # and so is a verify that sent it back to review (Run 0)
    _states: dict[int, tuple[str, int]] = field(default_factory=dict)
    _said: set[tuple] = field(default_factory=set)  # other news already told
    _batch: list[Item] = field(default_factory=list)
    _batch_at: float | None = None  # when the batch goes
    _held: list[Item] = field(default_factory=list)  # waiting out the quiet hours

    def presence(self, away: bool, since: float, *, at: float | None = None) -> Spell | None:
        """The person left (`away`) or came back, at `since`. Coming back returns
        the spell that ended when anything happened in it (the briefing). `at`:
        when the change was seen; an event that happened before it (a Run that
        ended while the person was there, told after they left) is no news of
        the spell."""
        if away == self.away:
            return None
        self.away = away
        self.away_at = at if away else None
        if away:
            self.spell = Spell(since=since)
            # a full disk, or Runs that cannot be contained, are news again
            self._said = {k for k in self._said if k[0] not in ("disk", "sandbox")}
            return None
        ended, self.spell = self.spell, None
        self._batch, self._batch_at, self._held = [], None, []
        if ended is None:
            return None
        self.last_spell = (ended, since)
        return ended if ended.happened else None

    def event(self, stamp: ev.Stamp) -> None:
        """Take one event in; what it means goes out with `tick`."""
        e = stamp.event
        if isinstance(e, ev.Presence):
            return
        before = self.away_at is not None and stamp.at < self.away_at  # happened while present
        if self.spell is not None and not before:
            self.spell.add(e)
        if isinstance(e, ev.JobGone):
            # what waits to be told of it is no news now; a later Run of it is
            self._batch = [it for it in self._batch if it.job_id != e.job_id]
            self._held = [it for it in self._held if it.job_id != e.job_id]
            self._states.pop(e.job_id, None)
            if self.last_spell is not None:
                self.last_spell[0].forget(e.job_id)
            return
        news = True
        if isinstance(e, ev.RunEnded):
            news = self._states.get(e.job_id) != (e.state, e.run_id)
            self._states[e.job_id] = (e.state, e.run_id)
        else:
            key = _key(stamp)
            news = key not in self._said
            if key is not None:
                self._said.add(key)
        if not news or not self.away or before:
            return
        item = item_for(stamp, self.rules.limit_after, self.rules.replies)
        if item is None:
            return
        self._batch.append(item)
        if self._batch_at is None:
            self._batch_at = stamp.at + self.rules.batch

    def tick(self, now: float, minute: int) -> list[Message]:
        """The messages due at `now` (local `minute` of the day)."""
        if not self.away:
            return []
        ready: list[Item] = []
        quiet = in_quiet(minute, self.rules.quiet)
        morning = bool(self._held) and not quiet  # what waited out the quiet goes now
        if morning:
            ready, self._held = self._held, []
        if self._batch_at is not None and now >= self._batch_at:
            for it in self._batch:
                if quiet and it.kind not in self.rules.urgent:
                    self._held.append(it)
                else:
                    ready.append(it)
            self._batch, self._batch_at = [], None
        night = spent(self.spell) if morning and self.spell is not None else ""
        if night:  # the morning's digest says what the night cost
            ready.append(Item("spent", "What the night cost", night))
        return [digest(ready)] if ready else []

    def next_wake(self, now: float) -> float | None:
        """When `tick` may next have something to say (None: only an event can)."""
        moments = []
        if self._batch_at is not None:
            moments.append(self._batch_at)
        if self._held:
            moments.append(now + QUIET_LOOK)
        return min(moments) if moments else None
