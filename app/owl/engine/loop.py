"""The engine: one worker thread that feeds the lifecycle core and carries out its actions.

Everything that changes state happens on this thread, in order: events from
the machine (input, idle, power), from the agents (exit, output, tree gone),
from the clock (deadlines) and from people (verbs through the control socket
or the tray, queued as calls with a reply). The core decides; its actions
are carried out in order by `acting.py` (trees signalled, checks started,
ends recorded). The parts with rules of their own are functions of the
engine's state (`state.py`) in modules beside it, run on this thread: which
Jobs start (`starting.py`), a Run's start, checks, watch and end
(`runstart.py`, `runchecks.py`, `runwatch.py`, `runend.py`), the machine
under the idle policy (`machineread.py`) and Shifts (`shiftwork.py`).
`Engine` is that state with this thread on top: it imports the parts, and
none of them imports it. What people ask and read stands above the engine
and imports it, never the other way: the verbs in `owl.verbs.engine_side`,
what people read in `owl.verbs.views`, `owl.verbs.statusdoc` and
`owl.verbs.looking` (read on this thread through `Engine.call`).

Nothing slow runs here: a Job's worktree is set up by `setup.py` on a thread
of its own, the git a verb needs runs on the caller's thread (`owl.verbs.caller_side`),
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

import functools
import logging
import queue
import threading
import time
from typing import Any, Callable

from owl.engine import acting, capwatch, carryon, machineread, oninput, runchecks
from owl.engine import runend, runstart, runwatch, sandboxwait, shiftwork, starting
from owl.engine.diskwatch import DiskWatch
from owl.engine.state import State, timing
from owl.errors import Refused
from owl.git import safegit
from owl.git import setup as setupmod
from owl.idle.machine import Machine
from owl.power.base import Inhibitor
from owl.power.keeper import AwakeKeeper
from owl.power.policy import hold_for_queue
from owl.settings import config as configmod
from owl.settings.paths import Paths
from owl.settings.watch import ConfigWatch, mtime as config_mtime
from owl.store.db import Store

log = logging.getLogger("owl.engine")


IDLE_WAKE = 60.0  # with nothing to do: a look now and then, no more
WATCH = 1.0  # while Runs are live: output, stall and new processes
ENDING_WATCH = 0.05  # while an exited agent's tree drains
AWAKE_WHY = "an agent is working"  # the one reason the sleep inhibitor is held for


class Engine(State):
    """The engine's state with its thread on top: the loop that feeds the core
    and hands each event to the phase it belongs to (see the module docstring)."""

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
        super().__init__(
            store=store,
            paths=paths,
            cfg=cfg,
            machine=machine,
            inhibitor=inhibitor,
            instance=instance,
            clock=clock,
        )
        self._config_mtime = config_mtime(paths.config)
        # Edits are read on a thread of their own and come back as events.
        self.config_watch = ConfigWatch(
            paths.config,
            lambda cfg, problem: self._q.put(("config", cfg, problem)),
            seen=self._config_mtime,
        )
        self.awake = AwakeKeeper(self, AWAKE_WHY)
        self._thread = threading.Thread(target=self._main, name="owl-engine", daemon=True)
        # The free space under the live Runs, read on a thread of its own; a
        # folder crossing runs.disk_floor comes back as an event (the Runs held).
        self.disk = DiskWatch(lambda: self.post(lambda: capwatch.floor(self, self.clock())))
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
                self.changes.note(self.fingerprint())
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
        moments += sandboxwait.wake_at(self, now)
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

    # ------------------------------------------------------------- keep awake

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
        self.awake.want(bool(self.working_runs()) or queued, self.cfg.keep_awake)

    # ----------------------------------------------------------------- config

    def _apply_config(self, cfg: configmod.Config | None, problem: str | None) -> None:
        """An edit the config watch read (off this thread): apply it, or say why not."""
        if cfg is None:
            self.config_problem = f"{problem} (the last good config stays in force)"
            log.warning("config not applied: %s", problem)
            return
        self.cfg = cfg
        self.config_problem = None
        self.core.timing = timing(cfg)
        carryon.bound_waits(self.store, self.waits, cfg.max_wait)  # a lower max_wait holds now
        log.info("config reloaded")

    # ---------------------------------------- what verbs and the daemon call by name
    # Their bodies live in the modules named; each runs on this thread.

    do = acting.do
    decide = starting.decide
    unknown_settings = starting.unknown_settings
    learn_settings = starting.learn_settings
    start_job = starting.start_job
    own_ref_moves = runend.own_ref_moves
    set_shift = shiftwork.set_shift
    machine_event = machineread.machine_event
