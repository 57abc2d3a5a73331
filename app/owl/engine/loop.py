"""The engine: one worker thread that feeds the lifecycle core and carries out its actions.

Everything that changes state happens on this thread, in order: events from
the machine (input, idle, power), from the agents (exit, output, tree gone),
from the clock (deadlines) and from people (verbs through the control socket
or the tray, queued as calls with a reply). The core decides; its actions
are carried out in order by `acting.py` (trees signalled, checks started,
ends recorded). The
verbs themselves are in `verbs.py` and what people read in `views.py` and
`statusdoc.py` (from a `statusdoc.Snapshot` this thread hands over). The parts
with rules of their own are functions of the engine in modules beside it, run on this thread: which
Jobs start (`starting.py`), a Run's start, checks, watch and end (`runstart.py`,
`runchecks.py`, `runwatch.py`, `runend.py`), the machine under the idle policy
(`machineread.py`) and Shifts (`shiftwork.py`).

Nothing slow runs here: a Job's worktree is set up by `setup.py` on a thread
of its own, the git a verb needs runs on the caller's thread (`verbwork.py`),
config edits are read by `config_watch.py`, the sleep inhibitor's D-Bus
calls are `awake_keeper.py`'s, and a kill sends its signals without waiting
for the kernel; each comes back as an event on the queue.

It sleeps until the next thing that can change something: the core's next
deadline, the moment the machine would count as idle, an agent's exit, an
input event (only while the machine counts as idle, so mouse moves during the
day cost one timestamp each), or a config edit (read on a thread of its own,
`config_watch`, it arrives as an event). With nothing live and nothing
queued it still wakes every few seconds.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import queue
import sqlite3
import threading
import time
from typing import Any, Callable

from owl.engine import capwatch, carryon, containing
from owl.engine.changes import Changes, fingerprint
from owl.engine import checks as checksmod
from owl.settings import config as configmod
from owl.store import diskroom
from owl.rules import lifecycle
from owl.rules import shifts
from owl.verbs import statusdoc, views
from owl.settings.watch import ConfigWatch, mtime as config_mtime
from owl.power.base import Inhibitor
from owl.power.keeper import AwakeKeeper
from owl.git import safegit
from owl.git import setup as setupmod
from owl.verbs import caller_side as verbwork
from owl.engine.diskwatch import DiskWatch
from owl.engine.sleepclock import SleepWatch
from owl.errors import Refused
from owl.idle.machine import Machine, Reading
from owl.settings.paths import Paths
from owl.power.policy import hold_for_queue, should_hold
from owl.store.db import Store
from owl.verbs.engine_side import Verbs, disk_full, job_row
from owl.engine import machineread, oninput, runchecks, runend, runstart, runwatch
from owl.engine import acting, budgeting, shiftwork, starting
from owl.engine.runstart import LOG_CAP, Live  # noqa: F401  (LOG_CAP is read from here too)

log = logging.getLogger("owl.engine")


def _timing(cfg: configmod.Config) -> lifecycle.Timing:
    return lifecycle.Timing(grace=cfg.grace_window, timeout=cfg.timeout, stall=cfg.stall)


IDLE_WAKE = 60.0  # with nothing to do: a look now and then, no more
WATCH = 1.0  # while Runs are live: output, stall and new processes
ENDING_WATCH = 0.05  # while an exited agent's tree drains


class Engine:
    def __init__(
        self,
        *,
        store: Store,
        paths: Paths,
        cfg: configmod.Config,
        machine: Machine,
        inhibitor: Inhibitor[Any] | None = None,
        instance: str = "",
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.paths = paths
        self.cfg = cfg
        self.config_problem: str | None = None
        self._config_mtime = config_mtime(paths.config)
        # Edits are read on a thread of their own and come back as events.
        self.config_watch = ConfigWatch(
            paths.config,
            lambda cfg, problem: self._q.put(("config", cfg, problem)),
            seen=self._config_mtime,
        )
        self.machine = machine
        self.inhibitor = inhibitor
        self.awake = AwakeKeeper(self, statusdoc.AWAKE_WHY)
        self.instance = instance
        self.clock = clock
        self.sleep_watch = SleepWatch(awake=clock, total=None if clock is time.monotonic else clock)
        self.core = lifecycle.Core(timing=_timing(cfg), paused=bool(store.setting("paused", False)))
        self.live: dict[int, Live] = {}
        self.reading = Reading(idle_for=None, on_ac=None)
        self.recheck_at = 0.0  # set by each reading (owl.engine.machineread)
        self.waiting: str | None = None
        self._q: queue.Queue[Any] = queue.Queue()
        self.armed = True  # wake on input: only while the machine counts as idle
        # The input that armed a freeze, while it is acted on: the freeze's
        # log line says where its time went (bench/wayland_freeze.py reads it).
        self.input_heard: oninput.Heard | None = None
        # What the hook stops at once on input (owl.engine.oninput), renewed each round.
        self.stop_on_input: oninput.Order = ()
        self._thread = threading.Thread(target=self._main, name="owl-engine", daemon=True)
        self.stopping = False  # shutting down: no Job starts
        self._stopped = threading.Event()
        self.has_pending = store.first_pending() is not None
        self.shift: shifts.Shift | None = None
        self.shift_runs: set[int] = set()  # live Runs that a Shift let run
        self.set_aside: set[int] = set()  # Jobs stopped by the person, this spell
        self.settings_cache: dict[str, tuple[float, Any]] = {}
        self.settings_reading: set[str] = set()  # projects whose settings are being read
        self.on_change: Callable[[], None] | None = None
        self.notifier: Any = None  # owl.notify.service.Notifier, set by the daemon
        self.changes = Changes()  # what views wait on (a tray's menu)
        self.acted = 0  # the core's actions carried out so far
        self.verbs = Verbs(self)  # the person's requests, run on this thread
        self.unrecorded: list[runend.Unrecorded] = []  # finished Runs a full disk held back
        self.unnoted: dict[int, dict[str, Any]] = {}  # live Runs' fields a full disk held back
        self.reserve = diskroom.Reserve(paths.db.parent)  # room kept back for those records
        # The free space under the live Runs, read on a thread of its own; a
        # folder crossing runs.disk_floor comes back as an event (the Runs held).
        self.disk = DiskWatch(lambda: self.post(lambda: capwatch.floor(self, self.clock())))
        self.reserve.ensure()
        self.verifications: dict[int, checksmod.Verification] = {}  # `owl jobs verify`'s
        self.held: dict[int, str] = {}  # Jobs a verb's git holds (owl.verbs.engine_side.hold)
        self.waits = carryon.load_waits(store, cfg.max_wait)  # agents waiting out a usage limit
        self.containment = containing.Watch.now()  # whether Runs can be contained here
        self.after_run: dict[int, Callable[[], None]] = {}  # once a Run's tree is gone
        # Worktree setups run off this thread and come back as ("setup", result).
        self.setups = setupmod.Setups(
            lambda result: self._q.put(("setup", result)),
            functools.partial(starting.record_setup, self),
        )

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.machine.start(self._on_input, lambda: self._q.put(("wake",)))
        self._thread.start()
        self.config_watch.start()
        self.disk.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """End every live Run the way ADR-0011 says, then stop the thread."""
        self._q.put(("shutdown",))
        return self._stopped.wait(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run fn on the engine thread and return its result (or raise its error)."""
        if self._stopped.is_set():
            raise Refused("the daemon is stopping")
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._q.put(("call", fn, fut))
        if self._stopped.is_set() and fut.cancel():  # stopped as it was queued
            raise Refused("the daemon is stopping")
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            # Not begun yet: withdraw it, so it is never carried out behind the
            # person's back, and say so. Begun: it finishes; wait for its answer.
            if fut.cancel():
                raise Refused(
                    f"the daemon did not get to this within {timeout:g} s, so "
                    "nothing was done; try again in a moment"
                ) from None
            return fut.result()

    def post(self, fn: Callable[[], object]) -> None:
        """Run fn on the engine thread, from any thread, without waiting for it."""
        self._q.put(("call", fn, concurrent.futures.Future()))

    def agent_exited(self, run_id: int, code: int | None, popen: object) -> None:
        """From an agent's waiting thread: its process `popen` exited with `code`."""
        self._q.put(("exited", run_id, code, popen))

    def _on_input(self) -> None:
        # Runs on the input hook's thread for every event: a flag check, and
        # once armed, the stop of what the core would freeze (owl.engine.oninput).
        if self.armed:
            self.armed = False
            heard = time.monotonic()
            self._q.put(("input", heard, oninput.stop_first(self.stop_on_input)))

    # ------------------------------------------------------------ main loop

    def _main(self) -> None:
        safegit.forbid_here()  # git here would hold up a freeze
        try:
            shiftwork.load_shift(self)
            machineread.settle_machine(self, self.clock())
            while True:
                try:
                    item = self._q.get(timeout=self._wait())
                except queue.Empty:
                    item = None
                machineread.notice_sleep(self)  # before any event of a wake
                while item is not None:
                    self._handle(item)
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        item = None
                now = self.clock()
                machineread.settle_machine(self, now)
                self.do(self.core.tick(now))
                runwatch.watch(self, now)
                shiftwork.check_shift(self)
                if self.stopping:
                    if not self.live and not self.verifications and not self.setups.jobs():
                        break
                else:
                    starting.maybe_start(self, now)
                self._hold_awake()
                self.changes.note(fingerprint(self))
                armed = self.armed and not self.stopping
                self.stop_on_input = oninput.standing(self.core, self.live) if armed else ()
        except Exception:  # pragma: no cover - a bug; end what we started
            log.exception("engine failed; ending live Runs")
            for lv in list(self.live.values()):
                try:
                    lv.tree.kill()
                except Exception:
                    pass
        finally:
            self.config_watch.stop()
            self.disk.stop()
            self.awake.stop()  # lets go of the inhibitor
            self.machine.stop()
            self._stopped.set()
            self.changes.bump()
            # answer whoever is still waiting
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item[0] == "call" and item[2].set_running_or_notify_cancel():
                    item[2].set_exception(Refused("the daemon is stopping"))

    def _wait(self) -> float:
        now = self.clock()
        moments = [now + IDLE_WAKE]
        deadline = self.core.next_deadline()
        if deadline is not None:
            moments.append(deadline)
        if self.live:
            moments.append(now + WATCH)
            if any(lv.exited for lv in self.live.values()):
                moments.append(now + ENDING_WATCH)
        moments.append(self.recheck_at)  # when the idle policy may change its mind
        if self.shift is not None:
            moments.append(now + self.shift.left(time.time()))
        ends = [w.until - time.time() for w in self.waits.values() if w.until > time.time()]
        if ends and self.has_pending:
            moments.append(now + min(ends) + 0.05)  # a limit resets: its Jobs may start
        moments += containing.wake_at(self, now)
        moments += capwatch.wake_at(
            self, now
        )  # a Run near its memory cap  # the sandbox asked again: its Jobs may start
        return max(0.0, min(moments) - now)

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "call":
            _, fn, fut = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as e:  # delivered to the caller
                    fut.set_exception(e)
        elif kind == "exited":
            _, run_id, code, popen = item
            lv = self.live.get(run_id)
            if lv is not None and popen is lv.popen:  # not a step that ended before
                if runstart.start_again(self, lv):
                    return  # the same Run goes on, its lost start made again
                lv.exited = True
                capwatch.exited(self, lv)  # the kernel ended it at a cap: the cap's doing
                if lv.check_proc is not None and lv.check_proc.popen is popen:
                    if not runchecks.check_exited(self, lv, code):
                        return  # the same check started again: no verdict
                done = not (lv.report is not None and lv.report.at_checkpoint)
                self.do(self.core.exited(run_id, self.clock(), code, checks=done))
        elif kind == "input":
            now = self.clock()
            if not self.core.in_use:
                # The person is back: freeze before reading the machine (a round
                # trip to the X server), so the Run stops as soon as possible.
                self.input_heard = oninput.Heard(item[1], time.monotonic())
                self.do(self.core.input(now))
                self.input_heard = None
            oninput.undo(self.core, item[2])
            machineread.settle_machine(self, now, force_input=True)
        elif kind == "setup":
            starting.setup_done(self, item[1])
        elif kind == "config":
            self._apply_config(item[1], item[2])
        elif kind == "shutdown":
            if not self.stopping:
                self.stopping = True
                for v in self.verifications.values():
                    v.cancel(wait=0)
                self.setups.cancel_all()
                self.do(self.core.shutdown(self.clock()))

    # ---------------------------------------------------------------- records

    def note(self, run_id: int, **fields: Any) -> None:
        """Write a live Run's state or pids. These records help a person and a
        crash recovery; the Run itself is supervised from memory, so a write
        that fails is no reason to stop. A full disk first gives up the room
        kept back (`diskroom`); what still cannot be written is kept, newest
        value of each field, and written when there is room
        (`runend.record_pending_notes`), before the Run's end: no record lost."""
        held = self.unnoted.pop(run_id, {})
        fields = {**held, **fields}
        try:
            diskroom.write(self.reserve, lambda: self.store.set_run(run_id, **fields))
        except sqlite3.OperationalError as e:
            self.unnoted[run_id] = fields
            log.warning(
                "run %s: could not record %s yet (%s); kept until there is room",
                run_id,
                ", ".join(fields),
                e,
            )

    def disk_full_now(self) -> str | None:
        return disk_full(self.paths.db.parent)

    def note_queued(self) -> None:
        """A Job was queued (or queued again): look for one to start."""
        self.has_pending = True

    def forget_settings(self, project: str) -> None:
        """The project's `.owl.toml` may have changed: read it afresh when next needed."""
        self.settings_cache.pop(project, None)

    # ------------------------------------------------------------- keep awake

    def _working_runs(self) -> list[int]:
        """Live Runs whose agents are doing work (not frozen, not ending)."""
        return [
            r.id
            for r in self.core.runs.values()
            if r.id in self.live and should_hold([r.phase.value])
        ]

    def _hold_awake(self) -> None:
        """Hold the sleep inhibitor exactly while some Run works.

        Called after every pass of the loop, so a freeze or an end lets the
        machine sleep again within that pass, not at the next tick. The
        reason handed to the backend stays the same whatever the Runs are:
        one lock serves them all, and tools that list inhibitors would
        otherwise show a count that went stale."""
        if self.inhibitor is None:
            return
        # The D-Bus calls are the keeper's, on its own thread (owl.power.keeper).
        queued = hold_for_queue(
            self.cfg.hold_while_queued, self.has_pending, self.reading.on_ac, self.core.paused
        )
        self.awake.want(bool(self._working_runs()) or queued, self.cfg.keep_awake)

    # ----------------------------------------------------------------- config

    def _apply_config(self, cfg: configmod.Config | None, problem: str | None) -> None:
        """An edit the config watch read (off this thread): apply it, or say why not."""
        if cfg is None:
            self.config_problem = f"{problem} (the last good config stays in force)"
            log.warning("config not applied: %s", problem)
            return
        self.cfg = cfg
        self.config_problem = None
        self.core.timing = _timing(cfg)
        carryon.bound_waits(self.store, self.waits, cfg.max_wait)  # a lower max_wait holds now
        log.info("config reloaded")

    # ---------------------------------------- what verbs and the daemon call by name
    # Their bodies live in the modules named; each runs on this thread.

    do = acting.do
    grace_ends_at = acting.grace_ends_at
    decide = starting.decide
    unknown_settings = starting.unknown_settings
    learn_settings = starting.learn_settings
    start_job = starting.start_job
    own_ref_moves = runend.own_ref_moves
    set_shift = shiftwork.set_shift
    shift_view = shiftwork.shift_view
    machine_event = machineread.machine_event

    # ================================================================= views

    def job_view(self, job_id: int) -> dict[str, Any]:
        """The Job's view; what git adds comes later, off this thread (owl.verbs.caller_side)."""
        job = job_row(self.store, job_id)
        view = views.with_unrecorded(self.unrecorded, views.job_view(self.store, job, git=False))
        view[verbwork.LATER] = lambda v: views.add_git_facts(v, job)
        return view

    def snapshot(self) -> statusdoc.Snapshot:
        """What `statusdoc` may read, taken here on this thread."""
        return statusdoc.Snapshot(
            now=self.clock(),
            reading=self.reading,
            cfg=self.cfg,
            core=self.core,
            live=self.live,
            store=self.store,
            inhibitor=self.inhibitor,
            working=self._working_runs(),
            shift=self.shift_view(),
            waits=self.waits,
            waiting=self.waiting if self.has_pending else None,
            config_problem=self.config_problem,
            unrecorded=list(self.unrecorded),
            notify=self.notifier.view() if self.notifier is not None else None,
        )

    def status(self) -> dict[str, Any]:
        return {**statusdoc.status(self.snapshot()), "budget": budgeting.view(self)}
