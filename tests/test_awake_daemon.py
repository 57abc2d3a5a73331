"""Keeping the machine awake, end to end: the real daemon against a stand-in logind.

Each test runs the real `owl daemon` (manual machine) pointed at a stand-in
logind on a private bus (tests/support_logind.py). The stand-in hands out real
pipe descriptors and sees when every copy is closed, so "held" here means what
it means with the real logind: the lock follows the Runs that work, and it can
never outlive the daemon, however the daemon ends.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from support import need

from owlproc import OwlDaemon, make_project, wait_for

sys.path.insert(0, str(Path(__file__).parent))
from support_logind import StandIn  # noqa: E402

NOWHERE = "unix:path=/nonexistent/owl-test-bus"
WHY = "an agent is working"


@pytest.fixture
def logind():
    with StandIn() as standin:
        yield standin


def via_logind(standin: StandIn) -> dict[str, str]:
    """The daemon's environment to reach the stand-in over D-Bus itself."""
    return {"OWL_LOGIND_BUS": "session", "DBUS_SESSION_BUS_ADDRESS": standin.address}


def via_systemd_inhibit(standin: StandIn) -> dict[str, str]:
    """No bus for the daemon, but `systemd-inhibit` finds the stand-in."""
    return {
        "OWL_LOGIND_BUS": "session",
        "DBUS_SESSION_BUS_ADDRESS": NOWHERE,
        "DBUS_SYSTEM_BUS_ADDRESS": standin.address,
    }


def path_without(tmp_path: Path, tool: str) -> str:
    """A PATH with every program of ours except `tool` (git, nice, ionice stay)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            link = bin_dir / name
            if name != tool and not link.exists() and not link.is_symlink():
                link.symlink_to(os.path.join(folder, name))
    return str(bin_dir)


def awake(d: OwlDaemon) -> dict:
    return d.status()["awake"]


def test_lock_is_held_while_the_run_works_and_only_then(home, project, logind):
    with OwlDaemon(home, {"interruption": {"grace_window": "1m"}}, env=via_logind(logind)) as d:
        assert logind.held() == []
        job = d.add("sleep=60", project)
        d.machine("idle")
        run = d.wait_run(job, "running")

        [(what, who, why, mode, uid, pid)] = logind.wait_held(1)
        assert (what, who, why, mode) == ("idle", "Owl", WHY, "block")
        assert (uid, pid) == (os.getuid(), d.proc.pid)  # the daemon holds it, no agent
        st = awake(d)
        assert (st["held"], st["backend"], st["problem"], st["runs"]) == (
            True,
            "logind",
            None,
            [run["id"]],
        )
        assert st["why"] == f"run {run['id']} is working"
        text = d.ok("status")
        assert f"keep-awake: held while run {run['id']} is working (logind)" in text

        # The person returns: the Run freezes and the lock goes within a second.
        t0 = time.monotonic()
        d.machine("input")
        logind.wait_held(0, timeout=1.0)
        assert time.monotonic() - t0 < 1.0
        assert d.run_of(job)["state"] == "frozen"
        st = awake(d)
        assert (st["held"], st["why"], st["runs"]) == (False, None, [])
        assert "keep-awake: not held: no Run is working" in d.ok("status")

        # They leave again inside the window: thawed, and the lock is taken again.
        d.machine("idle")
        d.wait_run(job, "running")
        logind.wait_held(1)
        assert [(c[2], c[4]) for c in logind.calls()] == [(WHY, False), (WHY, True)]

        # Dropped by hand: the Run ends, and so does the lock.
        d.ok("jobs", "drop", str(job), "--force")
        d.wait_job(job, "cancelled")
        logind.wait_held(0, timeout=1.0)
        assert awake(d)["held"] is False
    assert len(logind.calls()) == 2


def test_lock_is_let_go_when_the_run_ends_on_its_own(home, project, logind):
    with OwlDaemon(home, env=via_logind(logind)) as d:
        job = d.add("sleep=0.5 write=out.txt commit=done exit=0", project)
        d.machine("idle")
        d.wait_run(job, "running")
        logind.wait_held(1)
        d.wait_job(job, "review")
        logind.wait_held(0, timeout=1.0)
        assert logind.calls() == [("idle", "Owl", WHY, "block", False)]
        assert awake(d)["held"] is False


def test_one_lock_serves_several_runs(home, tmp_path, logind):
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "b")
    with OwlDaemon(home, {"runs": {"max_parallel": 2}}, env=via_logind(logind)) as d:
        first = d.add("sleep=60", a)
        second = d.add("sleep=60", b)
        d.machine("idle")
        r1 = d.wait_run(first, "running")
        r2 = d.wait_run(second, "running")
        logind.wait_held(1)
        wait_for(
            lambda: sorted(awake(d)["runs"]) == sorted([r1["id"], r2["id"]]),
            what="both Runs named as the reason",
        )
        low, high = sorted([r1["id"], r2["id"]])  # (setups may finish in either order)
        assert awake(d)["why"] == f"runs {low}, {high} are working"
        assert len(logind.calls()) == 1
        # Both freeze (owl pause): no Run works, so the lock goes.
        d.ok("pause")
        wait_for(lambda: awake(d)["held"] is False, what="the lock to go")
        logind.wait_held(0, timeout=1.0)
    assert len(logind.calls()) == 1


@pytest.mark.parametrize("how", ["logind", "systemd-inhibit"])
def test_lock_goes_when_the_daemon_is_stopped(home, project, logind, how):
    if how == "systemd-inhibit":
        need.programs("systemd-inhibit")
    env = via_logind(logind) if how == "logind" else via_systemd_inhibit(logind)
    with OwlDaemon(home, env=env) as d:
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        logind.wait_held(1)
        assert awake(d)["backend"] == how
        assert d.stop(10) == 0
        logind.wait_held(0, timeout=1.0)


@pytest.mark.parametrize("how", ["logind", "systemd-inhibit"])
def test_lock_dies_with_a_crashed_daemon(home, project, logind, how):
    if how == "systemd-inhibit":
        need.programs("systemd-inhibit")
    env = via_logind(logind) if how == "logind" else via_systemd_inhibit(logind)
    with OwlDaemon(home, env=env) as d:
        job = d.add("setsid-child=60 sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(lambda: len(d.agent_pids()) == 2, what="agent and its setsid child")
        logind.wait_held(1)
        # The watchdog ends the agents as soon as the daemon is dead: held
        # still meanwhile, so that they are seen to outlive the daemon.
        [guard] = [
            c for c in psutil.Process(d.proc.pid).children() if "owl.daemon.watchdog" in c.cmdline()
        ]
        guard.suspend()
        try:
            d.kill()
            # The agents outlive the daemon, yet the lock is gone: no agent
            # inherited a copy of it.
            logind.wait_held(0, timeout=2.0)
            assert len(d.alive_agent_pids()) == 2
        finally:
            guard.resume()


def test_keep_awake_off_never_takes_the_lock(home, project, logind):
    with OwlDaemon(home, {"power": {"keep_awake": False}}, env=via_logind(logind)) as d:
        job = d.add("sleep=1 exit=0", project)
        d.machine("idle")
        d.wait_run(job, "running")
        st = awake(d)
        assert (st["enabled"], st["held"], st["backend"], st["problem"]) == (
            False,
            False,
            "none",
            None,
        )
        assert "keep-awake: off (power.keep_awake = false)" in d.ok("status")
        d.wait_job(job, "review")
    assert logind.calls() == []


def test_keep_awake_turned_on_while_running_takes_effect(home, project, logind):
    with OwlDaemon(home, {"power": {"keep_awake": False}}, env=via_logind(logind)) as d:
        first = d.add("sleep=0.2 exit=0", project)
        d.machine("idle")
        d.wait_job(first, "review")
        assert logind.calls() == []
        cfg = (home / "config.toml").read_text().replace("keep_awake = false", "keep_awake = true")
        (home / "config.toml").write_text(cfg)
        wait_for(lambda: awake(d)["enabled"], what="the config edit to be read")
        second = d.add("sleep=60", make_project(home.parent / "other"))
        d.wait_run(second, "running")
        logind.wait_held(1)
        assert awake(d)["backend"] == "logind"


def test_no_bus_and_no_tool_is_said_once_and_work_goes_on(home, project, tmp_path):
    env = {
        "OWL_LOGIND_BUS": "session",
        "DBUS_SESSION_BUS_ADDRESS": NOWHERE,
        "DBUS_SYSTEM_BUS_ADDRESS": NOWHERE,
        "PATH": path_without(tmp_path, "systemd-inhibit"),
    }
    with OwlDaemon(home, env=env) as d:
        first = d.add("sleep=0.2 write=a.txt commit=a exit=0", project)
        d.machine("idle")
        d.wait_job(first, "review")
        second = d.add("sleep=0.2 exit=0", make_project(tmp_path / "other"))
        d.wait_job(second, "review")

        st = awake(d)
        assert (st["enabled"], st["held"], st["backend"]) == (True, False, "none")
        problem = st["problem"]
        assert "no D-Bus session bus" in problem and "no systemd-inhibit" in problem
        assert problem.endswith("the machine may sleep during a Run")
        assert "keep-awake: unavailable (no D-Bus session bus)\n" in d.ok("status")
    said = [line for line in d.log_text().splitlines() if "may sleep during a Run" in line]
    assert len(said) == 1, said


def test_refusal_is_said_once_and_work_goes_on(home, tmp_path):
    with StandIn(refuse=True) as logind, OwlDaemon(home, env=via_logind(logind)) as d:
        for name in ("a", "b"):
            job = d.add("sleep=0.2 exit=0", make_project(tmp_path / name))
            d.machine("idle")
            d.wait_job(job, "review")
        st = awake(d)
        assert (st["held"], st["backend"]) == (False, "logind")
        assert "logind refused" in st["problem"]
        assert logind.held() == []
    said = [line for line in d.log_text().splitlines() if "may sleep during a Run" in line]
    assert len(said) == 1, said


if not sys.platform.startswith("linux"):  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="the stand-in logind is a Linux D-Bus service")


def test_hold_while_queued_keeps_the_machine_up_on_ac_while_jobs_wait(home, project, logind):
    """power.hold_while_queued: the person works, a Job waits for them to leave;
    the lock is held on AC so the desktop's own idle suspend cannot come first,
    and let go on a battery, when paused, and once nothing waits."""
    config = {"power": {"hold_while_queued": True}}
    with OwlDaemon(home, config, env=via_logind(logind)) as d:
        d.machine("input")
        job = d.add("sleep=60", project)
        [(what, _, why, _, _, _)] = logind.wait_held(1)
        assert (what, why) == ("idle", WHY)
        st = awake(d)
        assert st["held"] and st["runs"] == [] and st["hold_while_queued"] is True
        assert st["why"] == "Jobs wait, on AC (power.hold_while_queued)"
        d.machine("battery")
        logind.wait_held(0, timeout=2.0)
        d.machine("ac")
        logind.wait_held(1)
        d.ok("pause")
        logind.wait_held(0, timeout=2.0)
        d.ok("resume")
        logind.wait_held(1)
        d.ok("jobs", "drop", str(job), "--force")
        logind.wait_held(0, timeout=2.0)


def test_hold_while_queued_is_off_by_default(home, project, logind):
    with OwlDaemon(home, env=via_logind(logind)) as d:
        d.machine("input")
        job = d.add("sleep=60", project)
        assert d.job_state(job) == "pending"
        d.ok("status")  # a pass of the engine after the add: the lock would be asked for
        assert logind.held() == [] and awake(d)["hold_while_queued"] is False
