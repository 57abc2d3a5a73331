"""Jobs that wait for a sandbox, and the sandbox asked again while they wait.

`mode = "required"` and no sandbox to be had: the agents whose Runs must be
contained are held as an agent waiting out a usage limit is, and the sandbox
is asked again off the engine thread (`containing.REASK_FIRST`, doubling to
`containing.REASK_MAX`) so their Jobs start by themselves once it works.
Apart from `containing` because these are run phases of the engine (they take
its state as `eng` and post back to its thread), while `containing` and its
`Watch` are what the engine's state is made of, below every phase.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from owl.engine.containing import (
    REASK_FIRST,
    REASK_MAX,
    needs_sandbox,
    settings_for,
    waiting_words,
)
from owl.rules import agentchain
from owl.sandbox import ready

if TYPE_CHECKING:
    from owl.engine.state import State

log = logging.getLogger("owl.engine")


def held_agents(eng: State, job_agents: Iterable[str]) -> frozenset[str]:
    """The agents (of these Jobs' chains and the fallback) whose Runs wait for a
    sandbox now; asks again, off this thread, when the last answer is old."""
    w = eng.containment
    if w.problem is None:
        return frozenset()
    reask(eng)
    names = {n for a in job_agents for n in agentchain.names(a, eng.cfg.fallback or [])}
    return frozenset(n for n in names if needs_sandbox(eng.cfg, n))


def wake_at(eng: State, now: float) -> list[float]:
    """When the engine should wake to ask the sandbox again (Jobs wait for it)."""
    w = eng.containment
    return [w.next_at] if w.problem and eng.has_pending and w.next_at > now else []


def reask(eng: State, force: bool = False) -> None:
    """Probe the sandbox again on a thread of its own, when due (or `force`)."""
    w = eng.containment
    if w.asking or (not force and eng.clock() < w.next_at):
        return
    w.asking = True

    def probe() -> None:
        try:
            problem = ready.ask()
        except Exception as e:  # never leave the engine believing a probe is under way
            problem = f"bwrap could not be asked: {e}"
        eng.post(lambda: learned(eng, problem))

    threading.Thread(target=probe, name="owl-sandbox-probe", daemon=True).start()


def learned(eng: State, problem: str | None) -> None:
    """A probe's answer, on the engine thread."""
    w = eng.containment
    w.asking = False
    if problem is None:
        if w.problem is not None:
            log.info("Runs can be contained again; the Jobs that waited for it may start")
        w.problem, w.strikes, w.held = None, 0, set()
        return
    if problem != w.problem:
        log.warning("Runs cannot be contained here: %s", problem)
    w.problem = problem
    w.strikes += 1
    w.next_at = eng.clock() + min(REASK_MAX, REASK_FIRST * 2 ** min(w.strikes - 1, 16))


def hold(eng: State, job_id: int, agent: str, narrowed: Mapping[str, object] | None) -> bool:
    """At a Run's launch: whether it must wait for a sandbox (its project's
    `.owl.toml` may require one where the config does not); the Job then sits
    out until the sandbox works, spending nothing."""
    problem = eng.containment.problem
    if problem is None or settings_for(eng.cfg, agent, narrowed).mode != "required":
        return False
    eng.containment.held.add(job_id)
    log.info("job %s waits: %s", job_id, waiting_words(problem))
    return True
