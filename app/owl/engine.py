"""The engine: one worker thread that feeds the lifecycle core and carries out its actions.

Everything that changes state happens on this thread, in order: events from
the machine (input, idle, power), from the agents (exit, output, tree gone),
from the clock (deadlines) and from people (verbs through the control socket
or the tray, queued as calls with a reply). The core decides; this module
signals process trees, starts agents and checks, and writes the store. The
verbs themselves are in `verbs.py` and what people read in `views.py`.

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
import logging
import os
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from owl import carryon
from owl import checks as checksmod
from owl import config as configmod
from owl import diskroom, logpipe
from owl import guards, lifecycle, outside, project as projectmod, scheduler, shifts, tree, views, workspace
from owl.config_watch import ConfigWatch
from owl.awake_keeper import AwakeKeeper
from owl import setup as setupmod, verbwork
from owl.sleepclock import SleepWatch
from owl.errors import Refused
from owl.lifecycle import Phase
from owl.machine import Reading
from owl.paths import Paths
from owl.power.policy import should_hold
from owl.store import Store, title_of
from owl.verbs import Verbs

log = logging.getLogger("owl.engine")

LOG_CAP = 8 * 1024 * 1024          # a Run's log is rotated at this size, as it is written
IDLE_WAKE = 5.0                    # with nothing to do: how often config edits are noticed
WATCH = 1.0                        # while Runs are live: output, stall and new processes
ENDING_WATCH = 0.05                # while an exited agent's tree drains


@dataclass
class Live:
    """What the engine holds for a live Run besides the core's view of it."""

    run_id: int
    job_id: int
    project: str
    title: str
    popen: Any
    tree: Any
    log_path: Path
    sink: Any                            # a logpipe.Sink: the agent's output into its log
    log_size: int = 0                    # bytes of output seen by the last watch
    exited: bool = False
    pids: list[int] = field(default_factory=list)
    # verification: the checks read from the base branch when the Run started
    worktree: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    checks: tuple = ()
    check_proc: Any = None                # the check running now (a checks.CheckProcess)
    results: list = field(default_factory=list)
    waiting: bool = False                 # its next check waits, frozen, to begin
    untouchable: list = field(default_factory=list)   # processes the system kept from us
    outside_before: Any = None            # the project's refs, config, hooks at the start
    # the agent: its driver and context, and what its output said (carryon)
    driver: Any = None
    ctx: Any = None
    resuming: bool = False                # started with --resume: a refusal falls back fresh
    report: Any = None                    # the driver's Report, set just before "exited"
    cgroup: Any = None                    # the Run's own cgroup v2, where one can be made


class Engine(Verbs):
    def __init__(self, *, store: Store, paths: Paths, cfg: configmod.Config, machine: Any,
                 inhibitor: Any = None, instance: str = "", clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.paths = paths
        self.cfg = cfg
        self.config_problem: str | None = None
        self._config_mtime = self._mtime()
        # Edits are read on a thread of their own and come back as events.
        self._config_watch = ConfigWatch(
            paths.config, lambda cfg, problem: self._q.put(("config", cfg, problem)),
            seen=self._config_mtime)
        self.machine = machine
        self.inhibitor = inhibitor
        self.awake = AwakeKeeper(self, views.AWAKE_WHY)
        self.instance = instance
        self.clock = clock
        self.sleep_watch = SleepWatch(awake=clock, total=None if clock is time.monotonic else clock)
        self.core = lifecycle.Core(timing=self._timing(cfg), paused=bool(store.setting("paused", False)))
        self.live: dict[int, Live] = {}
        self.reading = Reading(idle_for=None, on_ac=None)
        self.waiting: str | None = None
        self._q: queue.Queue[Any] = queue.Queue()
        self._armed = True               # wake on input: only while the machine counts as idle
        self._thread = threading.Thread(target=self._main, name="owl-engine", daemon=True)
        self._stopping = False
        self._stopped = threading.Event()
        self._pending_cache = store.first_pending() is not None
        self.shift: shifts.Shift | None = None
        self.shift_runs: set[int] = set()        # live Runs that a Shift let run
        self.set_aside: set[int] = set()         # Jobs stopped by the person, this spell
        self._projects: dict[str, tuple[float, Any]] = {}
        self._reading: set[str] = set()          # projects whose settings are being read
        self.on_change: Callable[[], None] | None = None
        self._unrecorded: list[tuple[tuple, Any, dict]] = []   # finished Runs a full disk held back
        self._reserve = diskroom.Reserve(paths.db.parent)     # room kept back for those records
        self._reserve.ensure()
        self._verifications: dict[int, checksmod.Verification] = {}
        self.waits = carryon.load_waits(store)   # agents waiting out a usage limit
        self.after_run: dict[int, Callable[[], None]] = {}   # once a Run's tree is gone
        # Worktree setups run off this thread and come back as ("setup", result).
        self.setups = setupmod.Setups(lambda result: self._q.put(("setup", result)),
                                      self._record_setup)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.machine.start(self._on_input, lambda: self._q.put(("wake",)))
        self._thread.start()
        self._config_watch.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """End every live Run the way ADR-0011 says, then stop the thread."""
        self._q.put(("shutdown",))
        return self._stopped.wait(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run fn on the engine thread and return its result (or raise its error)."""
        if self._stopped.is_set():
            raise Refused("the daemon is stopping")
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._q.put(("call", fn, fut))
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            # Not begun yet: withdraw it, so it is never carried out behind the
            # person's back, and say so. Begun: it finishes; wait for its answer.
            if fut.cancel():
                raise Refused(f"the daemon did not get to this within {timeout:g} s, so "
                              "nothing was done; try again in a moment") from None
            return fut.result()

    def _on_input(self) -> None:
        # Runs on the input hook's thread for every event: keep it to a flag check.
        if self._armed:
            self._armed = False
            self._q.put(("input",))

    # ------------------------------------------------------------ main loop

    def _main(self) -> None:
        try:
            self._load_shift()
            self._settle_machine(self.clock())
            while True:
                try:
                    item = self._q.get(timeout=self._wait())
                except queue.Empty:
                    item = None
                self._notice_sleep()        # before any event of a wake
                while item is not None:
                    self._handle(item)
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        item = None
                now = self.clock()
                self._settle_machine(now)
                self._do(self.core.tick(now))
                self._watch(now)
                self._check_shift()
                if self._stopping:
                    if not self.live and not self._verifications and not self.setups.jobs():
                        break
                else:
                    self._maybe_start(now)
                self._hold_awake()
        except Exception:  # pragma: no cover - a bug; end what we started
            log.exception("engine failed; ending live Runs")
            for lv in list(self.live.values()):
                try:
                    lv.tree.kill()
                except Exception:
                    pass
        finally:
            self._config_watch.stop()
            self.awake.stop()           # lets go of the inhibitor
            self.machine.stop()
            self._stopped.set()
            # answer whoever is still waiting
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item[0] == "call":
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
        moments.append(self._machine_recheck(now))
        if self.shift is not None:
            moments.append(now + self.shift.left(time.time()))
        ends = [w.until - time.time() for w in self.waits.values() if w.until > time.time()]
        if ends and self._pending_cache:
            moments.append(now + min(ends) + 0.05)     # a limit resets: its Jobs may start
        return max(0.0, min(moments) - now)

    def _notice_sleep(self) -> None:
        """Tell the core how long the machine slept, if it did: a frozen Run's
        grace window counts the sleep (see lifecycle.Core.slept)."""
        slept = self.sleep_watch.slept()
        if not slept:
            return
        log.info("the machine slept for %.0f s", slept)
        self._do(self.core.slept(self.clock(), slept))
        for r in self.core.runs.values():
            if r.phase is Phase.FROZEN and r.id in self.live:
                self._note(r.id, grace_ends_at=self._grace_ends_at(r))

    def _handle(self, item: tuple) -> None:
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
            if lv is not None and popen is lv.popen:      # not a step that ended before
                if self._fall_back(lv):
                    return                    # the same Run goes on in a fresh conversation
                lv.exited = True
                if lv.check_proc is not None and lv.check_proc.popen is popen:
                    self._check_exited(lv, code)
                self._do(self.core.exited(run_id, self.clock(), code))
        elif kind == "input":
            now = self.clock()
            if not self.core.in_use:
                # The person is back: freeze before reading the machine (a round
                # trip to the X server), so the Run stops as soon as possible.
                self._do(self.core.input(now))
            self._settle_machine(now, force_input=True)
        elif kind == "setup":
            self._setup_done(item[1])
        elif kind == "config":
            self._apply_config(item[1], item[2])
        elif kind == "shutdown":
            if not self._stopping:
                self._stopping = True
                for v in self._verifications.values():
                    v.cancel(wait=0)
                self.setups.cancel_all()
                self._do(self.core.shutdown(self.clock()))

    # --------------------------------------------------------------- machine

    def _settle_machine(self, now: float, force_input: bool = False) -> None:
        r = self.machine.read()
        self.reading = r
        cfg = self.cfg
        # Power is read on every settle (a few sysfs reads); how often a settle
        # happens without an event is _machine_recheck's business.
        power_ok = (not cfg.require_ac_power) or r.on_ac is True
        if power_ok == self.core.on_battery:
            self._do(self.core.power(now, power_ok))
        quiet = r.idle_for
        in_use = force_input or quiet is None or quiet < cfg.idle_after
        if in_use and not self.core.in_use:
            self._do(self.core.input(now))
        elif not in_use and self.core.in_use:
            self._do(self.core.idle(now))
            self.set_aside.clear()          # a new idle spell: stopped Jobs may run again
        self._armed = not self.core.in_use or not r.hooks_live

    def _machine_recheck(self, now: float) -> float:
        r = self.reading
        if self.core.in_use and r.idle_for is not None:
            return now + max(0.05, self.cfg.idle_after - r.idle_for)
        if not r.hooks_live and any(x.phase is Phase.RUNNING for x in self.core.runs.values()):
            return now + 1.0          # no input events here: look for the person's return
        if self.live or self._pending_cache:
            return now + 5.0          # power changes have no event
        return now + 30.0

    def machine_event(self, event: str) -> None:
        """Drive a ManualMachine (tests, scripts); the engine re-reads it at once."""
        setter = getattr(self.machine, "set", None)
        if setter is None:
            raise Refused("the machine is read from its own input here, not set by hand "
                          "(start the daemon with OWL_MACHINE=manual)")
        try:
            setter(event)
        except ValueError as e:
            raise Refused(str(e)) from None
        self._settle_machine(self.clock())

    # --------------------------------------------------------------- actions

    def _do(self, actions: list[lifecycle.Action]) -> None:
        for action in actions:
            lv = self.live.get(action.run)
            if lv is None:
                continue
            if isinstance(action, lifecycle.Freeze):
                lv.tree.freeze()
                r = self.core.runs[action.run]
                self._note(lv.run_id, state="frozen", frozen_by=r.frozen_by,
                           grace_ends_at=self._grace_ends_at(r))
                log.info("run %s frozen by %s", lv.run_id, r.frozen_by)
            elif isinstance(action, lifecycle.Thaw):
                lv.tree.thaw()
                self._note(lv.run_id, state=self.core.runs[action.run].state, frozen_by=None)
                log.info("run %s thawed", lv.run_id)
            elif isinstance(action, lifecycle.StartCheck):
                self._start_check(lv, action.index)
            elif isinstance(action, lifecycle.Term):
                if lv.waiting:
                    lv.exited = True      # its check never began: nothing is left to end
                lv.tree.term()
                self._note(lv.run_id, state="ending", frozen_by=None)
                log.info("run %s asked to stop", lv.run_id)
            elif isinstance(action, lifecycle.Kill):
                # One round of SIGKILLs, no waiting for the kernel to reap: the
                # watch sees the tree go, and the core asks again if it is wedged.
                lv.tree.kill(timeout=0)
                log.info("run %s killed", lv.run_id)
            elif isinstance(action, lifecycle.Finish):
                self._finish(lv, action)
                if lv.cgroup is not None:
                    lv.cgroup.remove()
                then = self.after_run.pop(action.run, None)
                if then is not None:
                    then()
            if not isinstance(action, lifecycle.Finish):
                self._note_untouchable(lv)
        if actions and self.on_change is not None:
            self.on_change()

    def _grace_ends_at(self, r: lifecycle.Run) -> float | None:
        """The wall-clock end of a frozen Run's window, for the watchdog."""
        left = r.grace_left(self.clock())
        return None if left is None else time.time() + left

    def _note_untouchable(self, lv: Live) -> None:
        """Name, once, each process of the Run the system would not let us
        signal (it became root, say): it is left alone and everything else
        goes on, but the person must know it is still there."""
        known = {p["pid"] for p in lv.untouchable}
        new = [p for p in lv.tree.refused() if p["pid"] not in known]
        if not new:
            return
        lv.untouchable = lv.untouchable + new
        for p in new:
            log.warning("run %s: pid %s (%s) is left alone: %s", lv.run_id, p["pid"],
                        p["command"], p["why"])
        self._note(lv.run_id, untouchable=lv.untouchable)

    def _finish(self, lv: Live, f: lifecycle.Finish) -> None:
        lv.sink.close()
        verdict = carryon.conclude(self.store, self.waits, run_id=lv.run_id,
                                   agent=getattr(lv.driver, "name", ""), outcome=f.outcome.value,
                                   ended_by=f.ended_by.value, reason=f.reason,
                                   exit_code=f.exit_code, report=lv.report)
        f = lifecycle.Finish(f.run, lifecycle.Outcome(verdict.outcome), f.ended_by,
                             verdict.reason, f.exit_code)
        reason = f.reason
        failed = [r for r in lv.results if r.outcome == "failed"]
        if f.outcome is lifecycle.Outcome.FAILED and failed and reason:
            line = checksmod.last_line(failed[-1].output)
            if line and failed[-1].exit_code not in (None, 0) and failed[-1].exit_code > 0:
                reason = f"{reason}: {line}"      # e.g. the shell's "not found"
        # Out of attempts with failing checks, the agent's work exists but does
        # not pass: a person must look, so the Job is blocked, not exhausted.
        spent = ("blocked", f"its checks failed on every attempt: {reason}") if failed else None
        outcome = f.outcome.value
        broken = self._broken_workspace(lv)
        if broken and outcome == "succeeded":
            outcome, reason = "failed", broken      # a Run that could not commit never succeeds
        # the time it ended, kept with the record should it be written later
        args = (lv.run_id, outcome, f.ended_by.value, reason, f.exit_code, time.time())
        try:
            new_state = diskroom.write(self._reserve,
                                       lambda: self.store.finish_run(*args, spent=spent))
            if broken and new_state in ("pending", "exhausted", "review"):
                self.store.set_job(lv.job_id, state="blocked", reason=broken)
                new_state = "blocked"
        except sqlite3.OperationalError as e:
            # A full disk: the Run is over all the same. Keep its record and
            # write it when there is room (or the next start records it
            # interrupted, should the daemon stop first).
            log.error("run %s ended but could not be recorded yet: %s", lv.run_id, e)
            self._unrecorded.append((args, spent, {"job_id": lv.job_id, "title": lv.title,
                                                   "log": str(lv.log_path)}))
            new_state = "not yet recorded"
        if new_state == "review":
            passed = sum(1 for r in lv.results if r.passed)
            log.info("%s", checksmod.review_message(lv.job_id, passed))
        del self.live[lv.run_id]
        self._outside_after(lv)
        log.info("run %s %s (%s); job %s is %s", lv.run_id, f.outcome.value, f.ended_by.value,
                 lv.job_id, new_state)

    # ----------------------------------------------------------------- watch

    def _watch(self, now: float) -> None:
        if not self.live:
            return
        tree.reap_orphans(self._owned)
        for lv in list(self.live.values()):
            self._watch_log(lv, now)
            if lv.check_proc is not None:
                lv.check_proc.trim()
            if lv.exited and not lv.tree.alive():
                self._do(self.core.gone(lv.run_id, now))
                r = self.core.runs.get(lv.run_id)
                if r is not None and r.check is not None and not r.check_live:
                    lv.exited, lv.waiting = False, True   # frozen before its check began
                continue
            reaper = getattr(lv.popen, "reaper_pid", None)     # the Run's own, not the agent's
            pids = sorted(p for p, _ in lv.tree.identities() if p != reaper)
            if pids != lv.pids and self.core.runs.get(lv.run_id) is not None:
                lv.pids = pids
                self._note(lv.run_id, pids=lv.tree.identities())

    def _note(self, run_id: int, **fields: Any) -> None:
        """Write a live Run's state or pids. These records help a person and a
        crash recovery; the Run itself is supervised from memory, so a write
        that fails (a full disk) is logged and supervision goes on."""
        try:
            self.store.set_run(run_id, **fields)
        except sqlite3.OperationalError as e:
            log.warning("run %s: could not record %s: %s", run_id, ", ".join(fields), e)

    def _record_pending_finishes(self) -> None:
        while self._unrecorded:
            args, spent = self._unrecorded[0][:2]
            try:
                diskroom.write(self._reserve, lambda: self.store.finish_run(*args, spent=spent))
            except sqlite3.OperationalError:
                return
            self._unrecorded.pop(0)
            log.info("run %s recorded %s", args[0], args[1])
        self._reserve.ensure()

    def _disk_full(self) -> str | None:
        try:
            self._refuse_if_full()
        except Refused as e:
            return str(e)
        return None

    def _owned(self, pid: int) -> bool:
        return any(lv.popen.pid == pid and lv.popen.returncode is None for lv in self.live.values())

    def _watch_log(self, lv: Live, now: float) -> None:
        # The sink keeps the log within LOG_CAP as it writes; here only a sign of life.
        seen = lv.sink.received
        if seen != lv.log_size:
            self.core.output(lv.run_id, now)
            lv.log_size = seen

    # ------------------------------------------------------------- starting

    def _maybe_start(self, now: float) -> None:
        self._record_pending_finishes()
        head = self.store.first_pending()
        self._pending_cache = head is not None
        if head is None:
            self.waiting = None
            return
        full = self._disk_full()
        if full:
            self.waiting = full.split(": no new Jobs")[0]
            return
        ok, why = self.core.may_start()
        if not ok:
            self.waiting = why if why != "the machine is in use" or self.reading.problem is None \
                else f"the machine cannot be read: {self.reading.problem}"
            return
        while True:
            decision = self._decide()
            self.waiting = decision.waiting
            if decision.job is None:
                return
            self._start_job(decision.job.id, exempt=False)

    def _decide(self, asked: bool = False) -> scheduler.Decision:
        """What the scheduler says now. Jobs the person stopped sit out the rest
        of this spell (`owl stop` ends this work, not work), unless `asked`."""
        aside = frozenset() if asked else frozenset(self.set_aside)
        limited = carryon.blocked_agents(self.waits, time.time())
        setting_up = self.setups.jobs()       # they hold their places and slots
        passed = aside | frozenset(setting_up)

        def first(skip: set[str] = set()) -> scheduler.QueuedJob | None:
            row = self.store.first_pending(skip, passed, limited)
            return scheduler.QueuedJob(*row) if row else None

        head_row = self.store.first_pending()
        self._pending_cache = head_row is not None
        head = first()
        decision = scheduler.decide(head, first, [lv.project for lv in self.live.values()]
                                    + list(setting_up.values()),
                                    max_parallel=self.cfg.max_parallel,
                                    project_cap=self._project_cap)
        if head_row is not None and head_row[0] in setting_up and decision.job is None:
            decision = scheduler.Decision(None, f"job {head_row[0]} is being set up")
        if head_row is not None and head_row[0] in aside and decision.waiting is None:
            decision = scheduler.Decision(decision.job, f"job {head_row[0]} was stopped; it "
                                          "waits for the next idle spell (or owl start)")
        if head_row is not None and limited and decision.waiting is None:
            agent = (self.store.job(head_row[0]) or {}).get("agent")
            if agent in limited:
                decision = scheduler.Decision(decision.job, f"job {head_row[0]} waits for "
                                              f"{self.waits[agent].reason}")
        return decision

    def project_settings(self, project: str) -> projectmod.ProjectSettings:
        """A project's `.owl.toml` from its base branch, cached for a few seconds.

        Raises ProjectError when the file is broken."""
        now = self.clock()
        hit = self._projects.get(project)
        if hit is None or now - hit[0] > 10.0:
            try:
                value: Any = projectmod.load(Path(project))
            except projectmod.ProjectError as e:
                value = e
            except (OSError, workspace.WorkspaceError) as e:
                value = projectmod.ProjectSettings()
                log.warning("cannot read %s's settings: %s", project, e)
            hit = (now, value)
            self._projects[project] = hit
        if isinstance(hit[1], projectmod.ProjectError):
            raise hit[1]
        return hit[1]

    def _project_cap(self, project: str) -> int | None:
        """The project's cap, from what is known now: its `.owl.toml` is read (git)
        on a thread of its own, and until it is first known no more of the
        project's Jobs start (a cap of 0 for the moment)."""
        caps = [self.cfg.project_cap(project)]
        settings = self._settings_now(project)
        if settings is None:
            return 0
        if not isinstance(settings, projectmod.ProjectError):   # reported when its Job starts
            caps.append(settings.max_parallel)
        caps = [c for c in caps if c is not None]
        return min(caps) if caps else None

    def _settings_now(self, project: str) -> Any:
        """The cached settings (or ProjectError) of a project, None if not yet known;
        a stale or missing entry is read again off this thread."""
        hit = self._projects.get(project)
        if (hit is None or self.clock() - hit[0] > 10.0) and project not in self._reading:
            self._reading.add(project)

            def read() -> None:
                try:
                    value: Any = projectmod.load(Path(project))
                except projectmod.ProjectError as e:
                    value = e
                except (OSError, workspace.WorkspaceError) as e:
                    value = projectmod.ProjectSettings()
                    log.warning("cannot read %s's settings: %s", project, e)

                def store() -> None:
                    self._reading.discard(project)
                    self._projects[project] = (self.clock(), value)
                self._q.put(("call", store, concurrent.futures.Future()))
            threading.Thread(target=read, name="owl-project", daemon=True).start()
        return None if hit is None else hit[1]

    def _start_job(self, job_id: int, *, exempt: bool) -> None:
        """Begin setting up the Job's worktree, on a thread of its own (see owl.setup);
        the agent starts when it is ready (`_setup_done`), a failure blocks the Job."""
        job = self.store.job(job_id)
        assert job is not None
        if job_id in self._verifications:
            self._verifications.pop(job_id).cancel(wait=0)   # the Run takes the worktree
        # Read afresh: the checks that gate this Run are those committed now.
        self._projects.pop(str(job["project"]), None)
        self.setups.begin(setupmod.Request(
            job=job, agent_config=self.cfg.agent(job["agent"]), prefix=self.cfg.branch_prefix,
            worktrees=self.paths.worktrees, instance=self.instance, exempt=exempt))
        log.info("job %s: setting up its worktree", job_id)

    def _record_setup(self, job_id: int, fresh: dict | None) -> None:
        """From a setup's thread: write (or clear) the names of what it is about to
        make, on this thread, and return once they are written."""
        def write() -> None:
            pending = dict(self.store.setting(setupmod.SETTING, {}) or {})
            if fresh is None:
                pending.pop(str(job_id), None)
            else:
                pending[str(job_id)] = fresh
            self.store.set_setting(setupmod.SETTING, pending or None)
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._q.put(("call", write, fut))
        fut.result(30)

    def _setup_done(self, result: setupmod.Result) -> None:
        """A setup came back: start the agent, block the Job, or leave it waiting."""
        job_id = result.job_id
        self.setups.done(job_id)
        pending = dict(self.store.setting(setupmod.SETTING, {}) or {})
        fresh = pending.pop(str(job_id), None)
        if isinstance(result, setupmod.Cancelled):
            self.store.set_setting(setupmod.SETTING, pending or None)
            log.info("job %s: setup cancelled; nothing of it is left", job_id)
            return
        job = self.store.job(job_id)
        if isinstance(result, setupmod.Failed):
            self.store.set_setting(setupmod.SETTING, pending or None)
            if job is not None and job["state"] in ("pending", "active"):
                self.store.set_job(job_id, state="blocked", reason=result.reason)
            log.warning("job %s blocked: %s", job_id, result.reason)
            return
        ws = result.ws
        self.store.set_job(job_id, branch=ws.branch, worktree=str(ws.worktree), base=ws.base,
                           base_branch=(job or {}).get("base_branch") or result.made_from)
        self.store.set_setting(setupmod.SETTING, pending or None)   # the Job owns it now
        del fresh
        job = self.store.job(job_id)
        ok, why = self.core.may_start()
        if (job is None or job["state"] != "pending" or self._stopping
                or (not result.exempt and not ok) or (result.exempt and self.core.paused)):
            log.info("job %s: set up, but not started now (%s)", job_id,
                     "stopping" if self._stopping else why or (job or {}).get("state"))
            return
        self._launch(job, result)

    def _launch(self, job: dict, ready: setupmod.Ready) -> int | None:
        """Start the agent of a Job whose worktree is ready (fast: no git)."""
        from owl import agents

        job_id, ws, settings, driver = job["id"], ready.ws, ready.settings, ready.driver
        exempt = ready.exempt
        project = Path(job["project"])
        before = outside.take(project)      # files only: a few milliseconds
        plan, replies = carryon.plan_for(self.store, job, driver, ws.worktree)
        run_id = self.store.start_run(job_id)
        self.store.give_replies(job_id, run_id)
        self.store.set_run(run_id, resumed=int(plan.resume is not None) if driver.stream_json
                           else None)
        log_path = self.paths.logs / f"{run_id}.log"
        self.store.set_run(run_id, log=str(log_path))
        attempt = len(self.store.runs(job_id))
        ctx = agents.RunContext(
            job_id=job_id, run_id=run_id, attempt=attempt, job_prompt=job["prompt"],
            worktree=ws.worktree, branch=ws.branch, base=ws.base,
            agent_config=self.cfg.agent(job["agent"]),
            failure_note=self._failure_note(job_id, run_id),
            resume=plan.resume, message=plan.message, replies=replies)
        env = carryon.agent_env(os.environ)
        env.update(driver.env(ctx))
        env.update({"OWL_JOB_ID": str(job_id), "OWL_RUN_ID": str(run_id),
                    "OWL_INSTANCE": self.instance})
        sink = logpipe.Sink(log_path, LOG_CAP)
        cg = tree.RunGroup.make(self.instance, str(run_id))
        try:
            popen = tree.spawn(driver.argv(ctx), cwd=str(ws.worktree), env=env,
                               stdout=sink.fd, stderr=sink.fd, nice=self.cfg.nice, reaper=True,
                               cgroup=cg)
        except OSError as e:
            sink.close()
            if cg is not None:
                cg.remove()
            self.store.finish_run(run_id, "failed", None, f"the agent could not be started: {e}",
                                  None)
            self.store.set_job(job_id, state="blocked",
                               reason=f"the agent could not be started: {e}")
            return None
        sink.started()
        pt = tree.ProcessTree(("OWL_RUN_ID", str(run_id)), popen.pid, cgroup=cg)
        lv = Live(run_id=run_id, job_id=job_id, project=str(project), title=title_of(job["prompt"]),
                  popen=popen, tree=pt, log_path=log_path, sink=sink, worktree=ws.worktree,
                  env=env, checks=settings.checks, outside_before=before, driver=driver,
                  ctx=ctx, resuming=plan.resume is not None, cgroup=cg)
        self.live[run_id] = lv
        threading.Thread(target=self._wait_agent, args=(lv, popen, 0), daemon=True,
                         name=f"owl-run-{run_id}").start()
        self.store.set_run(run_id, pids=pt.identities())
        log.info("run %s of job %s started (pid %s)", run_id, job_id, popen.pid)
        self._do(self.core.started(run_id, self.clock(), exempt=exempt,
                                   checks=[(c.name, c.timeout) for c in settings.checks]))
        return run_id

    def _base_settings(self, project: Path, base: str | None) -> projectmod.ProjectSettings:
        """The `.owl.toml` of the commit the Job started from, not of whatever
        the base branch points to now: an agent can move that branch."""
        if not base:
            return self.project_settings(str(project))
        return projectmod.load(project, base)

    def _broken_workspace(self, lv: Live) -> str | None:
        """Why the Run's worktree can no longer reach its repository (files only), with
        what the person can do; None when it can."""
        if lv.worktree is None:
            return None
        problem = workspace.reach_problem(Path(lv.project), lv.worktree)
        if problem is None and not (lv.worktree / ".git").exists():
            problem = f"the worktree {lv.worktree} lost its .git during the Run"
        if problem is None:
            return None
        job = self.store.job(lv.job_id) or {}
        return guards.broken_reason(lv.job_id, job.get("branch"), problem)

    def _outside_after(self, lv: Live) -> None:
        """Compare the project's refs, config and hooks with the Run's start,
        on a thread of its own (it runs git), and record what changed."""
        before = lv.outside_before
        if before is None:
            return
        job = self.store.job(lv.job_id) or {}
        ignore = outside.owned_ref(job.get("branch"), self.store.branches(lv.project))
        project, run_id, job_id = Path(lv.project), lv.run_id, lv.job_id

        def compare() -> list[dict] | None:
            return outside.changes(before, outside.take(project), ignore_ref=ignore)

        if self._stopping:                 # no later pass of the loop would record it
            self._record_outside(run_id, job_id, compare())
            return

        def work() -> None:
            found = compare()
            self._q.put(("call", lambda: self._record_outside(run_id, job_id, found),
                         concurrent.futures.Future()))
        threading.Thread(target=work, daemon=True, name=f"owl-outside-{run_id}").start()

    def _own_ref_moves(self, project: Path, before: outside.Snapshot) -> None:
        """Owl itself moved refs in `project` (accept --merge): the live Runs
        there take those moves as their starting point, so no agent is said to
        have made them."""
        moved = outside.moves(before, outside.take(project))
        for lv in self.live.values():
            if lv.project == str(project) and lv.outside_before is not None:
                lv.outside_before = outside.with_moves(lv.outside_before, moved)

    def _record_outside(self, run_id: int, job_id: int, found: list[dict] | None) -> None:
        import json

        if found is None:
            log.warning("job %s run %s: the project's refs, config and hooks could not be "
                        "read at its start, so nothing was compared", job_id, run_id)
            return
        self._note(run_id, outside=json.dumps(found))
        if found:
            log.warning("job %s run %s: %s", job_id, run_id, outside.summary(found))
        if self.on_change is not None:
            self.on_change()

    def _failure_note(self, job_id: int, run_id: int) -> str | None:
        runs = [r for r in self.store.runs(job_id) if r["id"] != run_id]
        if runs and runs[-1]["outcome"] == "failed" and runs[-1]["reason"]:
            note = f"The previous Run failed: {runs[-1]['reason']}"
            failed = [c for c in self.store.checks(runs[-1]["id"]) if c["outcome"] == "failed"]
            if failed:
                note += "\n\n" + checksmod.failure_note(failed[-1])
            return note
        return None

    def _wait_agent(self, lv: Live, popen: Any, offset: int) -> None:
        """The agent's own waiting thread: its exit, and what its output said."""
        def session(sid: str) -> None:
            self._q.put(("call", lambda: self._note(lv.run_id, session_id=sid),
                         concurrent.futures.Future()))

        sink = lv.sink
        code, lv.report = carryon.watch_agent(popen, lv.log_path, offset, lv.driver,
                                              lv.resuming, session, settle=sink.settle)
        self._q.put(("exited", lv.run_id, code, popen))

    def _fall_back(self, lv: Live) -> bool:
        """A resume the CLI refused: start the same Run afresh with the handoff, at once.

        No attempt is spent and the core never hears of the refused process.
        Only while the Run is running (frozen or ending, it ends as it is)."""
        report, r = lv.report, self.core.runs.get(lv.run_id)
        if not (lv.resuming and report is not None and report.resume_failed) \
                or r is None or r.phase is not Phase.RUNNING or lv.check_proc is not None:
            return False
        from dataclasses import replace

        lv.resuming, lv.report = False, None
        lv.ctx = replace(lv.ctx, resume=None, message=None)
        lv.sink.settle()
        offset = lv.log_path.stat().st_size if lv.log_path.exists() else 0
        old, lv.sink = lv.sink, logpipe.Sink(lv.log_path, LOG_CAP)   # appends to the same log
        old.close()
        os.write(lv.sink.fd, f"owl: the conversation could not be resumed ({report.resume_failed}); "
                             "starting afresh with the handoff\n".encode())
        lv.tree.kill()                 # anything the refused process left (before the
        try:                           # fresh one starts: the sweep finds the Run's tag)
            popen = tree.spawn(lv.driver.argv(lv.ctx), cwd=str(lv.worktree), env=lv.env,
                               stdout=lv.sink.fd, stderr=lv.sink.fd, nice=self.cfg.nice,
                               reaper=True, cgroup=lv.cgroup)
        except OSError as e:
            log.warning("run %s: could not start afresh: %s", lv.run_id, e)
            return False
        lv.sink.started()
        lv.popen, lv.tree = popen, tree.ProcessTree(("OWL_RUN_ID", str(lv.run_id)), popen.pid,
                                                    cgroup=lv.cgroup)
        self._note(lv.run_id, resumed=0, session_id=None, pids=lv.tree.identities())
        threading.Thread(target=self._wait_agent, args=(lv, popen, offset), daemon=True,
                         name=f"owl-run-{lv.run_id}-fresh").start()
        log.info("run %s: resume refused (%s); started afresh (pid %s)", lv.run_id,
                 report.resume_failed, popen.pid)
        return True

    def _wait_proc(self, run_id: int, popen: Any, settle: Callable[[], Any] | None = None) -> None:
        code = popen.wait()
        if settle is not None:
            settle()              # its output reaches the log before its result is read
        self._q.put(("exited", run_id, code, popen))

    # ---------------------------------------------------------------- checks

    def _start_check(self, lv: Live, index: int) -> None:
        """Start check `index` of a Run in a process tree of its own (the core said so)."""
        check = lv.checks[index]
        assert lv.worktree is not None
        env = checksmod.env_for(lv.env, check, index, lv.worktree, {})
        lv.waiting = False
        try:
            cp = checksmod.CheckProcess(
                check, index, worktree=lv.worktree, env=env,
                log_file=checksmod.log_path(self.paths.logs, lv.run_id, index),
                tag=("OWL_RUN_ID", str(lv.run_id)), nice=self.cfg.nice)
        except OSError as e:
            result = checksmod.Result(index, check.name, check.run, "failed", 127, 0.0,
                                      f"the check could not be started: {e}")
            self._record_check(lv, result)
            lv.exited = True
            self._do(self.core.exited(lv.run_id, self.clock(), 127))
            return
        lv.check_proc, lv.popen, lv.tree, lv.exited = cp, cp.popen, cp.tree, False
        self.store.set_run(lv.run_id, state="verifying", frozen_by=None,
                           pids=cp.tree.identities())
        threading.Thread(target=self._wait_proc, args=(lv.run_id, cp.popen, cp.settle),
                         daemon=True,
                         name=f"owl-check-{lv.run_id}-{index}").start()
        log.info("run %s: check %s (%s) started (pid %s)", lv.run_id, index + 1, check.name,
                 cp.popen.pid)

    def _check_exited(self, lv: Live, code: int) -> None:
        """Record the check that just exited, before the core hears of it."""
        cp, now = lv.check_proc, self.clock()
        r = self.core.runs.get(lv.run_id)
        duration = r.check_time(now) if r is not None else None
        if r is not None and r.phase is Phase.ENDING:
            # ended by the core (timeout, grace window, stop): not the check's own verdict
            outcome = "interrupted" if r.outcome is lifecycle.Outcome.INTERRUPTED else "failed"
        else:
            outcome = "passed" if code == 0 else "failed"
        result = cp.finish(outcome, code, duration)
        lv.check_proc = None
        self._record_check(lv, result)
        log.info("run %s: check %s %s (exit %s)", lv.run_id, result.name, outcome, code)

    def _record_check(self, lv: Live, result: checksmod.Result) -> None:
        lv.results.append(result)
        self.store.add_check(job_id=lv.job_id, run_id=lv.run_id, position=result.position,
                             name=result.name, command=result.command, outcome=result.outcome,
                             exit_code=result.exit_code, duration_s=result.duration_s,
                             output=result.output, log=result.log)

    def _working_runs(self) -> list[int]:
        """Live Runs whose agents are doing work (not frozen, not ending)."""
        return [r.id for r in self.core.runs.values()
                if r.id in self.live and should_hold([r.phase.value])]

    def _hold_awake(self) -> None:
        """Hold the sleep inhibitor exactly while some Run works.

        Called after every pass of the loop, so a freeze or an end lets the
        machine sleep again within that pass, not at the next tick. The
        reason handed to the backend stays the same whatever the Runs are:
        one lock serves them all, and tools that list inhibitors would
        otherwise show a count that went stale."""
        if self.inhibitor is None:
            return
        # The D-Bus calls are the keeper's, on its own thread (owl.awake_keeper).
        self.awake.want(bool(self._working_runs()), self.cfg.keep_awake)

    # ----------------------------------------------------------------- config

    def _mtime(self) -> float | None:
        try:
            return self.paths.config.stat().st_mtime_ns
        except OSError:
            return None

    @staticmethod
    def _timing(cfg: configmod.Config) -> lifecycle.Timing:
        return lifecycle.Timing(grace=cfg.grace_window, timeout=cfg.timeout, stall=cfg.stall)

    def _apply_config(self, cfg: configmod.Config | None, problem: str | None) -> None:
        """An edit the config watch read (off this thread): apply it, or say why not."""
        if cfg is None:
            self.config_problem = f"{problem} (the last good config stays in force)"
            log.warning("config not applied: %s", problem)
            return
        self.cfg = cfg
        self.config_problem = None
        self.core.timing = self._timing(cfg)
        log.info("config reloaded")

    # ----------------------------------------------------------------- shifts

    def _load_shift(self) -> None:
        sh = shifts.Shift.from_dict(self.store.setting("shift"))
        if sh is not None and not sh.plausible(time.time()):
            log.warning("the stored Shift (ending %s) is beyond any Shift's bounds; dropped",
                        sh.ends_at)
            sh = None
            self.store.set_setting("shift", None)
        if sh is not None and sh.over(time.time(), False):
            log.info("the stored Shift ended while the daemon was down")
            sh = None
            self.store.set_setting("shift", None)
        self._set_shift(sh)

    def _set_shift(self, sh: shifts.Shift | None) -> None:
        now = self.clock()
        self.shift = sh
        if sh is not None:
            self._do(self.core.shift_on(now, require_power=sh.require_power))
        else:
            self._do(self.core.shift_off(now))

    def _check_shift(self) -> None:
        if self.shift is None:
            self.shift_runs &= set(self.live)
            return
        self.shift_runs |= set(self.live)
        why = self.shift.over(time.time(), queue_empty=not self._pending_cache)
        if why is not None:
            log.info("the Shift ended: %s", why)
            self.store.set_setting("shift", None)
            self._set_shift(None)
            self.shift_runs &= set(self.live)

    def shift_view(self) -> dict | None:
        if self.shift is None:
            finishing = len(self.shift_runs & set(self.live))
            if not finishing:
                return None
            return {"on": False, "ended": True, "finishing": finishing,
                    "text": f"Shift ended, {finishing} Run{'s' if finishing != 1 else ''} finishing"}
        sh, now = self.shift, time.time()
        return {"on": True, "ended": False, "started_at": views.iso(sh.started_at),
                "ends_at": views.iso(sh.ends_at), "left_s": round(sh.left(now), 1),
                "until_empty": sh.until_empty, "require_power": sh.require_power,
                "held": self.core.paused,
                "finishing": 0}

    # ================================================================= views

    def job_view(self, job_id: int) -> dict:
        """The Job's view; what git adds comes later, off this thread (owl.verbwork)."""
        job = self._job_or_refuse(job_id)
        view = views.with_unrecorded(self, views.job_view(self.store, job, git=False))
        view[verbwork.LATER] = lambda v: views.add_git_facts(v, job)
        return view

    def status(self) -> dict:
        return views.status(self)


def _made_from(project: Path, job: dict, ws: "workspace.Workspace") -> str | None:
    """The branch a new worktree was made from (the project's current branch), recorded
    once so that `accept --merge` knows where to bring the Job's branch."""
    if job.get("base") is not None:
        return None             # made on an earlier Run, before this was recorded
    from owl.review.merge import current_branch

    try:
        return current_branch(project)
    except (OSError, workspace.WorkspaceError):
        return None
