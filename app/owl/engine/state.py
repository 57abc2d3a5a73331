"""The engine's state: what its run phases read and write, below all of them.

Every phase (`starting`, `runstart`, `runwatch`, `runchecks`, `runend`,
`acting`, `capwatch`, `budgeting`, `machineread`, `shiftwork`, …) is a set of
functions of this state, run on the engine thread, and `Engine`
(`owl.engine.loop`) is this state with the thread's loop on top that calls
them. Keeping the state here, with the records it holds (`live.Live`,
`containing.Watch`, `changes.Changes`, `checks.Verification`) below the
phases, is what lets the arrows point down: a phase imports the state and the
phases beneath it, and nothing imports the loop but what stands above the
engine (the verbs, the daemon).

One thing the phases need goes up by design: carrying out the core's actions
(`do`) starts checks, records ends and reads pids, which are phases above
some of the phases that decide (a Run's watch finds its tree gone, the core
says end it). `do` is therefore a method of the state that `Engine` gives
its body (`acting.do`), so the phases call it without importing what it
calls. It is the state's one such method; everything else here is data and
the few calls that only touch it (posting to the thread, writing a live
Run's fields).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import sqlite3
import threading
import time
from typing import Any, Callable

from owl.engine import carryon
from owl.engine.changes import Changes
from owl.engine.checks import Verification
from owl.engine.containing import Watch
from owl.engine.diskwatch import DiskWatch
from owl.engine.live import Live, Unrecorded
from owl.engine.oninput import Heard, Order
from owl.engine.sleepclock import SleepWatch
from owl.errors import Refused
from owl.git import setup as setupmod
from owl.idle.machine import Machine, Reading
from owl.power.base import Inhibitor
from owl.power.policy import should_hold
from owl.rules import lifecycle, shifts
from owl.settings import config as configmod
from owl.settings.paths import Paths
from owl.store import diskroom
from owl.store.db import Store

log = logging.getLogger("owl.engine")


def timing(cfg: configmod.Config) -> lifecycle.Timing:
    """The core's windows, as the config sets them."""
    return lifecycle.Timing(grace=cfg.grace_window, timeout=cfg.timeout, stall=cfg.stall)


class State:
    """What the engine knows and holds; see the module docstring.

    `Engine` sets the fields made of its phases (`setups`, `disk`) and the
    thread; every field is typed here, so a phase reads the state it is given
    without knowing the loop."""

    setups: setupmod.Setups  # worktree setups, off this thread (made by Engine)
    disk: DiskWatch  # the free space under the live Runs (made by Engine)

    def __init__(
        self,
        *,
        store: Store,
        paths: Paths,
        cfg: configmod.Config,
        machine: Machine,
        inhibitor: Inhibitor[Any] | None,
        instance: str,
        clock: Callable[[], float],
    ):
        self.store = store
        self.paths = paths
        self.cfg = cfg
        self.config_problem: str | None = None
        self.machine = machine
        self.inhibitor = inhibitor
        self.instance = instance
        self.clock = clock
        self.sleep_watch = SleepWatch(awake=clock, total=None if clock is time.monotonic else clock)
        self.core = lifecycle.Core(timing=timing(cfg), paused=bool(store.setting("paused", False)))
        self.live: dict[int, Live] = {}
        self.reading = Reading(idle_for=None, on_ac=None)
        self.recheck_at = 0.0  # set by each reading (owl.engine.machineread)
        self.waiting: str | None = None
        self._q: queue.Queue[Any] = queue.Queue()  # the thread's events, in order
        self._stopped = threading.Event()
        self.armed = True  # wake on input: only while the machine counts as idle
        # The input that armed a freeze, while it is acted on: the freeze's
        # log line says where its time went (bench/wayland_freeze.py reads it).
        self.input_heard: Heard | None = None
        # What the hook stops at once on input (owl.engine.oninput), renewed each round.
        self.stop_on_input: Order = ()
        self.stopping = False  # shutting down: no Job starts
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
        self.unrecorded: list[Unrecorded] = []  # finished Runs a full disk held back
        self.unnoted: dict[int, dict[str, Any]] = {}  # live Runs' fields a full disk held back
        self.reserve = diskroom.Reserve(paths.db.parent)  # room kept back for those records
        self.reserve.ensure()
        self.verifications: dict[int, Verification] = {}  # `owl jobs verify`'s
        self.held: dict[int, str] = {}  # Jobs a verb's git holds (owl.verbs.holding)
        self.waits = carryon.load_waits(store, cfg.max_wait)  # agents waiting out a usage limit
        self.containment = Watch.now()  # whether Runs can be contained here
        self.after_run: dict[int, Callable[[], None]] = {}  # once a Run's tree is gone

    # ----------------------------------------------------- the way up

    def do(self, actions: list[lifecycle.Action]) -> None:
        """Carry out the core's actions (the body is `acting.do`, given by `Engine`)."""
        raise NotImplementedError

    # ------------------------------------------- onto the thread, from any

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

    # ------------------------------------------------------------ records

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
        return diskroom.disk_full(self.paths.db.parent)

    def note_queued(self) -> None:
        """A Job was queued (or queued again): look for one to start."""
        self.has_pending = True

    def forget_settings(self, project: str) -> None:
        """The project's `.owl.toml` may have changed: read it afresh when next needed."""
        self.settings_cache.pop(project, None)

    def grace_ends_at(self, r: lifecycle.Run) -> float | None:
        """The wall-clock end of a frozen Run's window, for the watchdog."""
        left = r.grace_left(self.clock())
        return None if left is None else time.time() + left

    def working_runs(self) -> list[int]:
        """Live Runs whose agents are doing work (not frozen, not ending)."""
        return [
            r.id
            for r in self.core.runs.values()
            if r.id in self.live and should_hold([r.phase.value])
        ]

    def fingerprint(self) -> tuple[object, ...]:
        """What changed in the engine's turn, cheaply (`changes.Changes.note`):
        rows written, actions done, the machine's reading, the live Runs, held
        Jobs and checks run on demand."""
        r = self.reading
        return (
            self.store.db.total_changes,
            self.acted,
            r.idle_for is None,
            (r.idle_for or 0.0) >= self.cfg.idle_after,
            r.on_ac,
            r.problem,
            self.waiting,
            tuple(sorted(self.live)),
            tuple(sorted(self.held)),
            tuple(sorted(self.verifications)),
        )
