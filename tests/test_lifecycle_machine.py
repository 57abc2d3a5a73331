"""The lifecycle core under random events and clock steps (hypothesis).

After every step: no Run is frozen past its grace window + 5 s (time asleep
counted); a Kill comes at least 5 s after the Term before it; a Run the
person froze (pause, stop) is never thawed by anything but `resume`; no Run
is finished twice. At the end, with the daemon stopping and every process
gone, every Run has ended with exactly one Finish.
"""

from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from owl.rules import lifecycle as lc
from owl.rules.lifecycle import KILL_DELAY, USER, Core, Phase, Refusal, Timing

GRACE = 10.0
EPS = 1e-6


class CoreMachine(RuleBasedStateMachine):
    runs = Bundle("runs")

    @initialize()
    def setup(self) -> None:
        self.core = Core(timing=Timing(grace=GRACE, timeout=200.0, stall=60.0))
        self.now = 0.0
        self.next_id = 1
        self.frozen_since: dict[int, float] = {}  # Freeze seen at (time asleep added)
        self.last_term: dict[int, float] = {}
        self.finished: dict[int, int] = {}
        self.started: set[int] = set()

    # ---------------------------------------------------------- carrying out

    def apply(
        self, actions: list[lc.Action], *, resuming: bool = False, held: set[int] | None = None
    ) -> None:
        held = held or set()
        for a in actions:
            if isinstance(a, lc.Freeze):
                self.frozen_since[a.run] = self.now
            elif isinstance(a, (lc.Thaw, lc.StartCheck)):
                assert resuming or a.run not in held, f"run {a.run} thawed by the machine"
                self.frozen_since.pop(a.run, None)
            elif isinstance(a, lc.Term):
                self.frozen_since.pop(a.run, None)
                self.last_term[a.run] = self.now
            elif isinstance(a, lc.Kill):
                assert a.run in self.last_term, "Kill without a Term"
                assert self.now - self.last_term[a.run] >= KILL_DELAY - EPS, (
                    self.now,
                    self.last_term[a.run],
                )
            elif isinstance(a, lc.Finish):
                self.finished[a.run] = self.finished.get(a.run, 0) + 1
                self.frozen_since.pop(a.run, None)

    def held(self) -> set[int]:
        return {
            r.id for r in self.core.runs.values() if r.phase is Phase.FROZEN and r.frozen_by == USER
        }

    def event(self, fn, *args, resuming: bool = False) -> None:
        held = self.held()
        try:
            actions = fn(*args)
        except Refusal:
            return
        self.apply(actions, resuming=resuming, held=held)

    # ---------------------------------------------------------------- rules

    @rule(target=runs, exempt=st.booleans(), checks=st.integers(0, 2))
    def start(self, exempt: bool, checks: int) -> int:
        run = self.next_id
        self.next_id += 1
        self.started.add(run)
        self.event(
            self.core.started, run, self.now, exempt, [(f"c{i}", 30.0) for i in range(checks)]
        )
        return run

    @rule()
    def person_input(self) -> None:
        self.event(self.core.input, self.now)

    @rule()
    def machine_idle(self) -> None:
        self.event(self.core.idle, self.now)

    @rule(ok=st.booleans())
    def power(self, ok: bool) -> None:
        self.event(self.core.power, self.now, ok)

    @rule(dt=st.floats(0.0, 20.0))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        self.event(self.core.tick, self.now)

    @rule(seconds=st.floats(0.0, 30.0))
    def machine_sleeps(self, seconds: float) -> None:
        # `now` stands still while asleep; the frozen ones' windows count it
        for run in self.frozen_since:
            self.frozen_since[run] -= seconds
        self.event(self.core.slept, self.now, seconds)

    @rule(run=runs)
    def output(self, run: int) -> None:
        self.event(self.core.output, run, self.now)

    @rule(run=runs, code=st.sampled_from([0, 0, 1, -15, -9]))
    def exits(self, run: int, code: int) -> None:
        self.event(self.core.exited, run, self.now, code)

    @rule(run=runs)
    def tree_gone(self, run: int) -> None:
        r = self.core.runs.get(run)
        if r is not None and (r.exited or r.phase is Phase.ENDING):
            self.event(self.core.gone, run, self.now)

    @rule()
    def pause(self) -> None:
        self.event(self.core.pause, self.now)

    @rule()
    def resume(self) -> None:
        self.event(self.core.resume, self.now, resuming=True)

    @rule(force=st.booleans())
    def stop(self, force: bool) -> None:
        self.event(self.core.stop, self.now, force)

    @rule(run=runs)
    def drop(self, run: int) -> None:
        self.event(self.core.end, run, self.now, "dropped")

    @rule(require_power=st.booleans())
    def shift_on(self, require_power: bool) -> None:
        self.event(self.core.shift_on, self.now, require_power)

    @rule()
    def shift_off(self) -> None:
        self.event(self.core.shift_off, self.now)

    # ----------------------------------------------------------- invariants

    @invariant()
    def nothing_frozen_past_its_window(self) -> None:
        if not hasattr(self, "core"):
            return
        for r in self.core.runs.values():
            if r.phase is Phase.FROZEN:
                since = self.frozen_since.get(r.id)
                assert since is not None, f"run {r.id} frozen without a Freeze"
                assert self.now <= since + GRACE + KILL_DELAY + EPS, (r.id, since, self.now)

    @invariant()
    def finished_at_most_once(self) -> None:
        if not hasattr(self, "core"):
            return
        assert all(n == 1 for n in self.finished.values()), self.finished
        assert not set(self.finished) & set(self.core.runs)

    def teardown(self) -> None:
        if not hasattr(self, "core"):
            return
        # The daemon stops; every process is killed in the end and goes.
        self.event(self.core.shutdown, self.now)
        for _ in range(10):
            if not self.core.runs:
                break
            self.now += KILL_DELAY
            self.event(self.core.tick, self.now)
            for run in list(self.core.runs):
                r = self.core.runs.get(run)
                if r is not None and not r.exited:
                    self.event(self.core.exited, run, self.now, -9)
                self.event(self.core.gone, run, self.now)
        assert not self.core.runs, self.core.runs
        assert {r: n for r, n in self.finished.items()} == {r: 1 for r in self.started}


TestCoreMachine = CoreMachine.TestCase
TestCoreMachine.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
