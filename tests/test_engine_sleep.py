"""The engine notices a sleep: the real engine and real agent processes, with
the sleep itself faked (a suspend cannot be had here), through the engine's
SleepWatch."""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import psutil

from owl.settings import config as configmod
from owl.verbs import caller_side as verbwork
from owl.verbs import looking
from owl.verbs.engine_side import Verbs
from owl.engine.loop import Engine
from owl.rules.lifecycle import GRACE_PASSED
from owl.idle.machine import ManualMachine
from owl.settings.paths import Paths
from owl.store.db import Store
from owlproc import AGENT, make_project, wait_for


class FakeSleep:
    """A SleepWatch whose next report the test sets."""

    def __init__(self) -> None:
        self.pending = 0.0

    def slept(self) -> float:
        out, self.pending = self.pending, 0.0
        return out


def engine_in(tmp: Path, grace: float) -> Engine:
    root = tmp / "home"
    paths = Paths(
        config=root / "config.toml",
        db=root / "owl.db",
        socket=root / "s",
        logs=root / "logs",
        worktrees=root / "worktrees",
        runtime=root / "run",
    )
    paths.ensure()
    cfg = configmod.from_dict(
        {
            "idle": {"after": "1s", "require_ac_power": False},
            "interruption": {"grace_window": f"{grace:g}s"},
            "power": {"keep_awake": False},
            "agents": {"script": {"command": [sys.executable, AGENT, "{prompt}"]}},
            "agent": {"default": "script"},
        },
        "test",
    )
    # An instance of its own, as every daemon has: engines of tests running
    # side by side must not share a Run's cgroup (owl-<instance>/run-<id>).
    return Engine(
        store=Store(paths.db),
        paths=paths,
        cfg=cfg,
        machine=ManualMachine(),
        instance=uuid.uuid4().hex,
    )


def test_a_run_frozen_before_a_long_sleep_is_ended_on_wake_never_thawed(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="owl.engine")
    e = engine_in(tmp_path, grace=60.0)
    fake = FakeSleep()
    e.sleep_watch = fake
    e.start()
    try:
        prep = verbwork.prepare_add(e.cfg, "sleep=120", str(make_project(tmp_path / "p")), None)
        job = e.call(lambda: Verbs(e).add_prepared(prep, None))["id"]
        e.call(lambda: e.machine_event("idle"))
        wait_for(lambda: e.call(lambda: looking.status(e)["runs"]), timeout=10, what="a Run")
        e.call(lambda: e.machine_event("input"))
        run = wait_for(
            lambda: [
                r for r in e.call(lambda: looking.status(e)["runs"]) if r["state"] == "frozen"
            ],
            what="the Run frozen",
        )[0]
        procs = [psutil.Process(p) for p in run["pids"]]
        # A night's sleep; the wake comes with the machine idle again.
        fake.pending = 8 * 3600.0
        e.call(lambda: e.machine_event("idle"))
        first = wait_for(
            lambda: (r := e.call(lambda: looking.job_view(e, job))["runs"][0])["outcome"] and r,
            timeout=10,
            what="the Run to end",
        )
        assert first["outcome"] == "interrupted" and first["reason"] == GRACE_PASSED
        assert "the machine slept for 28800 s" in caplog.text
        assert "thawed" not in caplog.text
        wait_for(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs),
            timeout=5,
            what="the agent to end",
        )
    finally:
        assert e.stop(10)
