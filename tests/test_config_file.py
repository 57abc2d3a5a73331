"""A config.toml that is not a regular file is refused in one line and never
blocks anyone: not the daemon's start, not the running engine, not `owl config`."""

from __future__ import annotations

import os
import subprocess

import psutil
import pytest

from owl.settings import config as configmod
from owlproc import OWL, OwlDaemon, make_project, process_states, wait_for


def test_load_refuses_a_fifo_at_once(tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(configmod.ConfigError) as e:
        configmod.load(fifo)  # no writer: reading would block for ever
    assert "FIFO" in str(e.value) and "\n" not in str(e.value)


def test_load_refuses_a_device(tmp_path):
    with pytest.raises(configmod.ConfigError, match="character device"):
        configmod.load(__import__("pathlib").Path("/dev/zero"))


def test_the_daemon_will_not_start_on_a_fifo_and_says_so_in_one_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "config.toml")
    env = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual")
    p = subprocess.run([*OWL, "daemon"], env=env, capture_output=True, text=True, timeout=15)
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "FIFO" in p.stderr
    c = subprocess.run(
        [*OWL, "config", "check"], env=env, capture_output=True, text=True, timeout=15
    )
    assert c.returncode == 1 and "FIFO" in c.stderr and c.stderr.strip().count("\n") == 0


def test_a_config_swapped_for_a_fifo_is_refused_while_a_frozen_run_ends_on_time(tmp_path):
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("tick=0.2 sleep=60", make_project(tmp_path / "proj"))
        d.machine("idle")
        d.wait_run(job, "running")
        pids = wait_for(lambda: d.agent_pids(), what="the agent")
        d.machine("input")
        d.wait_run(job, "frozen")
        cfg = d.home / "config.toml"
        cfg.unlink()
        os.mkfifo(cfg)  # nobody will ever write into it
        problem = wait_for(
            lambda: d.status()["config_problem"], timeout=10, what="the FIFO to be refused"
        )
        assert "FIFO" in problem and "last good config stays" in problem
        # the grace window (3 s) still ends the Run; every verb still answers
        d.wait_job(job, "pending", timeout=12)
        wait_for(
            lambda: set(process_states(pids).values()) <= {"gone", psutil.STATUS_ZOMBIE},
            timeout=5,
            what="the agent to end",
        )
        assert "FIFO" in d.ok("status")
        assert d.stop() == 0
