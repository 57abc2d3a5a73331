"""The thread that hears the person's input stops the Run at once, without
waiting for the engine's thread; the engine still decides, and a stop it did
not decide is undone. The real engine, a real agent tree, the manual
machine's input said from the test's own thread as a hook would say it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from owl.engine.loop import Engine
from owl.verbs import caller_side as verbwork
from owl.verbs import looking
from owl.verbs.engine_side import Verbs
from owlproc import make_project, wait_for
from test_engine_sleep import engine_in


def _running_run(e: Engine, tmp_path) -> list[psutil.Process]:
    prep = verbwork.prepare_add(
        e.cfg, "setsid-child=120 sleep=120", str(make_project(tmp_path / "p")), None
    )
    e.call(lambda: Verbs(e).add_prepared(prep, None))
    e.call(lambda: e.machine_event("idle"))
    procs = wait_for(
        lambda: _agent_and_grandchild(e),
        timeout=15,
        what="a running Run with its session's grandchild",
    )
    # the engine has renewed its standing order since the Run's tree was read:
    # a call is answered during a round, and the order renewed at its end, so
    # the second call's answer comes after the first's round ended
    e.call(lambda: None)
    e.call(lambda: None)
    return procs


def _agent_and_grandchild(e: Engine) -> list[psutil.Process]:
    """The agent and the grandchild it started in a session of its own, once
    the Run's tree lists both; nothing while the sandbox is still being set
    up. (Its helpers, bwrap and the network helper, carry the agent's command
    line too: taken for the agent, one that exits meanwhile reads as a
    zombie, never stopped.)"""
    for r in e.call(lambda: looking.status(e)["runs"]):
        pids = set(r["pids"])
        for pid in pids:
            try:
                child = psutil.Process(pid)
                argv = child.cmdline()
                if argv[-2:-1] != ["-c"] or "time.sleep" not in argv[-1]:
                    continue
                agent = child.parent()
                if agent is not None and agent.pid in pids:
                    return [agent, child]
            except psutil.Error:
                pass
    return []


@contextmanager
def engine_held(e: Engine) -> Iterator[threading.Event]:
    """The engine's thread busy in a step of its own until the block ends."""
    busy, release = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(30)

    t = threading.Thread(target=lambda: e.call(hold, timeout=60), daemon=True)
    t.start()
    assert busy.wait(10)
    try:
        yield release
    finally:
        release.set()
        t.join(10)


def _states(procs: list[psutil.Process]) -> set[str]:
    return {p.status() for p in procs}


def test_input_stops_the_tree_while_the_engine_thread_is_busy(tmp_path):
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        procs = _running_run(e, tmp_path)
        with engine_held(e):
            e.machine.set("input")  # said on this thread, as an input hook's
            wait_for(
                lambda: _states(procs) == {psutil.STATUS_STOPPED},
                timeout=5,
                what="every process stopped while the engine's thread is busy",
            )
        run = wait_for(
            lambda: [
                r for r in e.call(lambda: looking.status(e)["runs"]) if r["state"] == "frozen"
            ],
            what="the engine's own freeze",
        )[0]
        assert run["frozen_by"] == "machine"
        assert _states(procs) == {psutil.STATUS_STOPPED}
        e.call(lambda: e.machine_event("idle"))
        wait_for(
            lambda: psutil.STATUS_STOPPED not in _states(procs),
            what="the Run thawed when the machine is idle again",
        )
    finally:
        assert e.stop(15)


def test_a_stop_the_engine_did_not_decide_is_undone(tmp_path):
    """A Shift begins just as the person comes back: the hook has stopped the
    tree from the order it last had, the core freezes nothing (a Shift's Run
    goes on while the person works), and the tree runs again."""
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        procs = _running_run(e, tmp_path)
        with engine_held(e):
            e.post(lambda: e.do(e.core.shift_on(e.clock(), require_power=False)))
            e.machine.set("input")
            wait_for(
                lambda: _states(procs) == {psutil.STATUS_STOPPED},
                timeout=5,
                what="the hook's stop",
            )
        wait_for(
            lambda: psutil.STATUS_STOPPED not in _states(procs),
            what="the stop undone: the Shift's Run goes on",
        )
        [run] = e.call(lambda: looking.status(e)["runs"])
        assert run["state"] == "running"
    finally:
        assert e.stop(15)
