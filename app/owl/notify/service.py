"""The notify thread: events in from the engine, messages out to the channels,
replies in from the phone, and what `owl status` shows of it all.

The engine's side is two calls that never wait: `emit(event)` (a queue put)
and `reading(idle_for, cfg)` once a pass, which turns the engine's own reading
of the machine into presence with the idle policy's rule (`idle.state.away`)
and `notify.away_after`, and puts an event only when presence changes. Here,
on a thread of its own, the rules (`route`) decide; git (a Job's diffstat)
runs here, bounded; each channel sends on its own thread (`sender`); replies
come back through `ask`, the same verbs `owl` uses, and are answered.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable

from owl.errors import Refused
from owl.idle.state import away as away_now
from owl.notify import briefing as briefmod
from owl.notify import channels, words
from owl.notify import events as ev
from owl.notify.replies import Incoming, Listener, NtfyListener, TelegramListener
from owl.notify.route import Router, Rules
from owl.notify.sender import Sender
from owl.rules import timefmt
from owl.settings.config import Config
from owl.settings.notifyconf import NotifyConfig, mask, quiet_text

log = logging.getLogger("owl.notify")

DIFFSTAT_TIMEOUT = 10.0
BRIEFING_SHOWN_S = 3600.0  # the tray's top line keeps the briefing this long

Ask = Callable[[str, dict], Any]


def local_minute(t: float) -> int:
    lt = time.localtime(t)
    return lt.tm_hour * 60 + lt.tm_min


def rules_of(n: NotifyConfig) -> Rules:
    return Rules(
        batch=n.batch,
        limit_after=n.limit_after,
        quiet=n.quiet,
        urgent=n.urgent,
        replies=bool(n.reply),
    )


class Notifier:
    def __init__(
        self,
        cfg: Config,
        *,
        ask: Ask,
        remember: Callable[[str, str], bool],
        started_at: float | None = None,
        clock: Callable[[], float] = time.time,
        minute_of: Callable[[float], int] = local_minute,
    ) -> None:
        self.cfg = cfg.notify
        self._ask = ask
        self._remember = remember
        self.started_at = clock() if started_at is None else started_at
        self._clock = clock
        self._minute_of = minute_of
        self._q: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()  # the router, between this thread and views
        self.router = Router(rules_of(self.cfg))
        self.sender = Sender(list(self.cfg.away), self._send)
        self.listener: Listener | None = None
        self._away = False  # as last told (the engine thread's)
        self._told: NotifyConfig = self.cfg  # the config last handed over (the engine's)
        self._briefing: tuple[briefmod.Spell, float] | None = None  # the spell, and when it ended
        self._thread = threading.Thread(target=self._main, daemon=True, name="owl-notify")

    # ------------------------------------------------ the engine's side (never waits)

    def emit(self, event: ev.Event, at: float | None = None) -> None:
        """Queue `event`; `at` is when it happened, where that is earlier than now:
        a Run's end is told once its git work is done, which may be after the
        person left, and it must not count as news of the away spell."""
        self._q.put(ev.Stamp(event, self._clock() if at is None else at))

    def reading(self, idle_for: float | None, cfg: Config, *, locked: bool | None = None) -> None:
        """The engine's reading of the machine, once a pass: presence, when it
        changes. A locked screen is away at once (`idle.state.away`)."""
        if cfg.notify is not self._told:
            self._told = cfg.notify
            self._q.put(("config", cfg.notify))
        after = cfg.notify.away_after if cfg.notify.away_after is not None else cfg.idle_after
        away = away_now(idle_for, after=after, locked=locked)
        if away != self._away:
            self._away = away
            now = self._clock()
            since = max(self.started_at, now - (idle_for or 0.0)) if away else now
            self._q.put(ev.Stamp(ev.Presence(away, since), now))

    def away_for(self, cfg: Config) -> float:
        """How long quiet counts as away (the engine wakes in time for it)."""
        return cfg.notify.away_after if cfg.notify.away_after is not None else cfg.idle_after

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._thread.start()
        self._listen(self.cfg)

    def stop(self) -> None:
        self._q.put(("stop",))
        self.sender.stop()
        if self.listener is not None:
            self.listener.stop()

    def _listen(self, n: NotifyConfig) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        if not n.reply:
            return
        # ntfy and Telegram count whole seconds: a message of the start's own second counts
        kw = dict(
            started_at=float(int(self.started_at)), remember=self._remember, handle=self.answer
        )
        try:
            if n.reply.startswith("tgram://"):
                self.listener = TelegramListener(n.reply, api=n.telegram_api, **kw)
            else:
                self.listener = NtfyListener(n.reply, **kw)
        except ValueError as e:
            log.warning("notify: replies from %s cannot be read: %s", mask(n.reply), e)
            return
        self.listener.start()

    def _send(self, url: str, title: str, body: str) -> channels.Answer:
        return channels.send(url, title, body, telegram_api=self.cfg.telegram_api)

    # ------------------------------------------------------------- the thread

    def _main(self) -> None:
        while True:
            with self._lock:
                wake = self.router.next_wake(self._clock())
            timeout = None if wake is None else max(0.0, wake - self._clock())
            try:
                item = self._q.get(timeout=timeout)
            except queue.Empty:
                item = None
            try:
                if isinstance(item, tuple) and item[0] == "stop":
                    return
                if isinstance(item, tuple) and item[0] == "config":
                    self._configure(item[1])
                elif isinstance(item, ev.Stamp):
                    self._take(item)
                self._tick()
            except Exception:  # a bug here must not end the notify thread
                log.exception("notify: an event could not be handled")

    def _configure(self, n: NotifyConfig) -> None:
        old, self.cfg = self.cfg, n
        with self._lock:
            self.router.rules = rules_of(n)
        if n.away != old.away:
            self.sender.stop()
            self.sender = Sender(list(n.away), self._send)
        if (n.reply, n.telegram_api) != (old.reply, old.telegram_api):
            self._listen(n)

    def _take(self, stamp: ev.Stamp) -> None:
        e = stamp.event
        if isinstance(e, ev.Presence):
            with self._lock:
                ended = self.router.presence(e.away, e.since, at=stamp.at)
                if ended is not None:
                    self._briefing = (ended, e.since)
            return
        if isinstance(e, ev.RunEnded) and self.router.away:
            if e.state == "review":
                stamp.extra["diffstat"] = diffstat(e)
            if not e.last_message and e.log:
                stamp.extra["log_tail"] = log_tail(e.log)
        if isinstance(e, ev.LimitWait):
            # dated when not today: a weekly limit must not read as this evening
            stamp.extra["until_hhmm"] = timefmt.ahead(e.until, stamp.at)
        with self._lock:
            self.router.event(stamp)
            if isinstance(e, ev.JobGone) and self._briefing is not None:
                self._briefing[0].forget(e.job_id)

    def _tick(self) -> None:
        now = self._clock()
        with self._lock:
            out = self.router.tick(now, self._minute_of(now))
        for m in out:
            self.sender.put(m.title, m.body)

    # ------------------------------------------------------------- replies

    def answer(self, msg: Incoming) -> str:
        """Carry out one reply (through the verbs `owl` uses) and say what came of it."""
        cmd = words.parse(msg.text, msg.about_job)
        log.info(
            "notify: a reply from %s asks %s%s",
            msg.channel,
            cmd.verb,
            f" for job {cmd.job_id}" if cmd.job_id else "",
        )
        try:
            if cmd.verb == "reply":
                out = self._ask("jobs.reply", {"id": cmd.job_id, "text": cmd.text})
                pos = out.get("position") if isinstance(out, dict) else None
                where = f", {words.ordinal(pos)} in the queue" if isinstance(pos, int) else ""
                return f"job {cmd.job_id} queued with your reply{where}"
            if cmd.verb == "accept":
                out = self._ask("jobs.accept", {"id": cmd.job_id})
                return _said(out, f"job {cmd.job_id} accepted")
            if cmd.verb == "drop":
                out = self._ask("jobs.drop", {"id": cmd.job_id})
                return _said(out, f"job {cmd.job_id} dropped")
            if cmd.verb in ("pause", "resume"):
                return _said(self._ask(cmd.verb, {}), cmd.verb + "d")
            if cmd.verb == "status":
                return status_line(self._ask("status", {}))
        except Refused as e:
            return f"not done: {e}"
        return words.HELP

    # --------------------------------------------------------------- views

    def view(self) -> dict:
        """`notify` in `owl status --json`."""
        now = self._clock()
        with self._lock:
            spell = self.router.spell
            current = briefmod.view(spell, now, ended=None) if spell is not None else None
            last = self.router.last_spell
            since_away = current or (
                briefmod.view(last[0], last[1], ended=last[1]) if last else None
            )
            # made afresh at each look: a Job dropped since is forgotten (JobGone)
            brief = (
                briefmod.view(*self._briefing, ended=self._briefing[1]) if self._briefing else None
            )
            if brief is not None and not brief["text"]:
                brief = None
        if brief is not None:
            brief["age_s"] = round(max(0.0, now - (brief.get("back_at") or now)), 1)
            brief["id"] = brief.get("back_at")
        n = self.cfg
        return {
            "away": self.router.away,
            "channels": self.sender.view(),
            "quiet": quiet_text(n.quiet) or None,
            "urgent": sorted(n.urgent),
            "reply": self.listener.view() if self.listener is not None else None,
            "briefing": brief,  # the last one, until a later spell brings another
            "since_away": since_away,
        }


def _said(out: Any, fallback: str) -> str:
    if isinstance(out, dict) and out.get("message"):
        return str(out["message"])
    return fallback


def status_line(st: Any) -> str:
    """`owl status` in one line, as a reply on the phone gets it."""
    if not isinstance(st, dict):
        return "Owl answered nothing"
    runs = st.get("runs") or []
    bits = [
        "paused"
        if st.get("paused")
        else (f"{len(runs)} Run{'s' if len(runs) != 1 else ''} live" if runs else "nothing running")
    ]
    bits.append(f"{st.get('queue_length', 0)} queued")
    review = [f"job {j['id']}" for j in st.get("review") or []]
    if review:
        bits.append("review: " + ", ".join(review))
    stuck = [f"job {j['id']} {j['state']}" for j in st.get("stuck") or []]
    if stuck:
        bits.append(", ".join(stuck))
    for w in st.get("limits") or []:
        bits.append(f"{w.get('agent')} waits until {str(w.get('until') or '')[11:16]}")
    return " · ".join(bits)


LOG_TAIL = 4096  # the last line of a Run's log is in its last bytes


def log_tail(path: str) -> str | None:
    """The end of a Run's log (a command agent's last line), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def diffstat(e: ev.RunEnded) -> str | None:
    """`git diff --shortstat` of the Job's branch against its start, bounded in time."""
    if not (e.project and e.base and e.branch):
        return None
    from owl.git import workspace

    try:
        proc = workspace.git(
            e.project,
            "diff",
            "--shortstat",
            f"{e.base}...{e.branch}",
            check=False,
            timeout=DIFFSTAT_TIMEOUT,
            config=workspace.BOUNDED,  # a huge file's lines are not counted
        )
    except Exception:
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None
