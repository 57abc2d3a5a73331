"""Keeping the machine awake: real locks from a stand-in logind on a real bus.

Each test gets its own private dbus-daemon with the stand-in logind on it
(tests/support_logind.py). The stand-in hands out real pipe descriptors and
notices when every copy is closed, so "held" here means what it means with
the real logind.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from support import need

from owlproc import wait_for
from owl.power import make_inhibitor, should_hold
from owl.power.logind import LogindInhibitor
from owl.power.systemd_inhibit import SystemdInhibitInhibitor

sys.path.insert(0, str(Path(__file__).parent))
from support_logind import StandIn  # noqa: E402

NOWHERE = "unix:path=/nonexistent/owl-test-bus"
# (under CI a missing tool is a failure, so there the tests run and fail)
needs_systemd_inhibit = pytest.mark.skipif(
    shutil.which("systemd-inhibit") is None and not need.under_ci(),
    reason="systemd-inhibit is not installed",
)


@pytest.fixture
def standin(monkeypatch):
    """A stand-in logind on a private bus that Owl is pointed at."""
    with StandIn() as logind:
        monkeypatch.setenv("OWL_LOGIND_BUS", "session")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", logind.address)
        yield logind


@pytest.fixture
def only_systemd_inhibit(standin, monkeypatch):
    """logind unreachable over D-Bus for us, but reachable for systemd-inhibit."""
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", NOWHERE)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", standin.address)
    return standin


def spawn_holder() -> subprocess.Popen:
    """A separate process that takes the lock and then just lives on."""
    code = textwrap.dedent(
        """
        import time
        from owl.power import make_inhibitor
        inhibitor = make_inhibitor()
        inhibitor.hold("held by a process about to be killed")
        print(inhibitor.backend, inhibitor.held, flush=True)
        time.sleep(60)
        """
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def kill_holder(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()


# -- when to hold -----------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], False),
        (["running"], True),
        (["verifying"], True),
        (["frozen"], False),
        (["ending"], False),
        (["frozen", "ending", "queued"], False),
        (["frozen", "running"], True),
        (iter(["frozen", "verifying"]), True),
    ],
)
def test_should_hold_only_while_work_goes_on(states, expected):
    assert should_hold(states) is expected


# -- logind over D-Bus ------------------------------------------------------


def test_hold_takes_an_idle_block_lock_from_logind(standin):
    inhibitor = make_inhibitor()
    assert inhibitor.backend == "logind"
    assert inhibitor.problem is None
    assert not inhibitor.held

    inhibitor.hold("Run 7 is working")

    assert inhibitor.held
    ((what, who, why, mode, uid, pid),) = standin.held()
    assert (what, who, why, mode) == ("idle", "Owl", "Run 7 is working", "block")
    assert (uid, pid) == (os.getuid(), os.getpid())
    inhibitor.close()


def test_release_lets_the_lock_go_within_a_second(standin):
    inhibitor = make_inhibitor()
    inhibitor.hold("work")
    standin.wait_held(1)

    inhibitor.release()

    assert not inhibitor.held
    standin.wait_held(0, timeout=1.0)
    inhibitor.release()  # idempotent
    assert standin.calls() == [("idle", "Owl", "work", "block", False)]


def test_hold_twice_takes_one_lock(standin):
    inhibitor = make_inhibitor()
    inhibitor.hold("first")
    inhibitor.hold("second")

    assert len(standin.calls()) == 1
    assert len(standin.held()) == 1
    inhibitor.close()


def test_hold_after_release_takes_a_new_lock(standin):
    inhibitor = make_inhibitor()
    inhibitor.hold("one")
    inhibitor.release()
    inhibitor.hold("two")

    assert [row[2] for row in standin.wait_held(1)] == ["two"]
    assert [(row[2], row[4]) for row in standin.calls()] == [("one", False), ("two", True)]
    inhibitor.close()


def test_lock_dies_with_a_process_killed_by_sigkill(standin):
    proc = spawn_holder()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["logind", "True"]
        ((*_, pid),) = standin.held()
        assert pid == proc.pid

        proc.send_signal(signal.SIGKILL)

        standin.wait_held(0, timeout=1.0)
    finally:
        kill_holder(proc)


def test_children_do_not_inherit_the_lock(standin):
    inhibitor = make_inhibitor()
    inhibitor.hold("work")
    # The worst case for a leak: a child that keeps every inheritable fd.
    child = subprocess.Popen(["sleep", "30"], close_fds=False)
    try:
        inhibitor.release()
        standin.wait_held(0, timeout=1.0)
    finally:
        child.kill()
        child.wait()


def test_close_releases_and_later_holds_do_nothing(standin):
    inhibitor = make_inhibitor()
    inhibitor.hold("work")
    inhibitor.close()
    standin.wait_held(0, timeout=1.0)

    inhibitor.hold("more work")

    assert not inhibitor.held
    assert len(standin.calls()) == 1


def test_a_refusal_is_a_problem_said_once_not_an_error(monkeypatch, caplog):
    with StandIn(refuse=True) as refusing:
        monkeypatch.setenv("OWL_LOGIND_BUS", "session")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", refusing.address)
        inhibitor = LogindInhibitor(retry_after=0)
        with caplog.at_level(logging.WARNING, logger="owl.power"):
            inhibitor.hold("work")
            inhibitor.hold("work")

        assert not inhibitor.held
        assert "AccessDenied" in inhibitor.problem
        assert inhibitor.problem.endswith("the machine may sleep during a Run")
        assert len([r for r in caplog.records if r.name == "owl.power"]) == 1
        inhibitor.release()


def test_a_lock_taken_after_trouble_clears_the_problem(standin):
    inhibitor = LogindInhibitor(retry_after=0)
    standin.set_refuse(True)
    inhibitor.hold("work")
    assert not inhibitor.held
    assert inhibitor.problem is not None

    standin.set_refuse(False)
    inhibitor.hold("work")

    assert inhibitor.held
    assert inhibitor.problem is None
    standin.wait_held(1)
    inhibitor.close()


def test_after_a_failure_holds_wait_before_asking_again(standin):
    inhibitor = LogindInhibitor(retry_after=60)
    standin.set_refuse(True)
    inhibitor.hold("work")
    standin.set_refuse(False)

    inhibitor.hold("work")  # asked again at once: not yet

    assert not inhibitor.held
    assert standin.calls() == []  # a refusal records nothing


def test_a_standing_wish_refused_is_asked_for_again_after_the_back_off(standin):
    """A Run that works on (or a Job that waits on) does not change the engine's
    wish: the keeper itself asks again once the backend's back-off has passed,
    as when the system bus is too slow to answer at the daemon's start."""
    from types import SimpleNamespace

    from owl.power.keeper import AwakeKeeper

    owner = SimpleNamespace(inhibitor=LogindInhibitor(retry_after=0.3))
    keeper = AwakeKeeper(owner, "work")
    try:
        standin.set_refuse(True)
        keeper.want(True, True)
        assert keeper.settled()
        assert not owner.inhibitor.held and owner.inhibitor.problem is not None
        standin.set_refuse(False)
        standin.wait_held(1, timeout=5.0)  # the wish never changed
        # logind holds the lock before the keeper has read its answer
        wait_for(lambda: owner.inhibitor.problem is None, timeout=5.0, what="the problem cleared")
        keeper.want(False, True)
        standin.wait_held(0, timeout=2.0)
    finally:
        keeper.stop()
        owner.inhibitor.close()


# -- systemd-inhibit, the fallback -----------------------------------------


@needs_systemd_inhibit
def test_falls_back_to_systemd_inhibit(only_systemd_inhibit):
    standin = only_systemd_inhibit
    inhibitor = make_inhibitor()
    assert inhibitor.backend == "systemd-inhibit"

    inhibitor.hold("Run 3 is working")
    inhibitor.hold("Run 3 is working")

    assert inhibitor.held
    ((what, who, why, mode, _uid, _pid),) = standin.held()
    assert (what, who, why, mode) == ("idle", "Owl", "Run 3 is working", "block")
    assert len(standin.calls()) == 1

    inhibitor.release()

    assert not inhibitor.held
    standin.wait_held(0, timeout=1.0)


@needs_systemd_inhibit
def test_systemd_inhibit_lock_dies_with_a_process_killed_by_sigkill(only_systemd_inhibit):
    standin = only_systemd_inhibit
    proc = spawn_holder()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["systemd-inhibit", "True"]
        ((*_, tool_pid),) = standin.held()
        tool = psutil.Process(tool_pid)

        proc.send_signal(signal.SIGKILL)

        standin.wait_held(0, timeout=1.0)
        # And the tool itself is gone, not orphaned. Its parent was killed, so
        # whoever adopted it reaps it in its own time: a zombie counts as gone.
        _wait_for(lambda: _gone(tool), timeout=1.0)
    finally:
        kill_holder(proc)


@needs_systemd_inhibit
def test_systemd_inhibit_that_died_is_taken_again(only_systemd_inhibit):
    standin = only_systemd_inhibit
    inhibitor = SystemdInhibitInhibitor(retry_after=0)
    inhibitor.hold("work")
    ((*_, tool_pid),) = standin.held()
    tool = psutil.Process(tool_pid)
    tool.kill()
    tool.wait(timeout=1.0)
    standin.wait_held(0, timeout=1.0)
    assert not inhibitor.held

    inhibitor.hold("work")

    assert inhibitor.held
    standin.wait_held(1)
    inhibitor.close()
    standin.wait_held(0, timeout=1.0)


@needs_systemd_inhibit
def test_systemd_inhibit_failure_is_a_problem(monkeypatch):
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", NOWHERE)
    inhibitor = SystemdInhibitInhibitor()

    inhibitor.hold("work")

    assert not inhibitor.held
    assert "systemd-inhibit" in inhibitor.problem
    assert "bus" in inhibitor.problem


# -- nothing to hold a lock with --------------------------------------------


def test_no_bus_and_no_systemd_inhibit_means_none(monkeypatch, tmp_path):
    monkeypatch.setenv("OWL_LOGIND_BUS", "system")
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", NOWHERE)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory

    inhibitor = make_inhibitor()
    inhibitor.hold("work")
    inhibitor.release()
    inhibitor.close()

    assert inhibitor.backend == "none"
    assert not inhibitor.held
    assert "no D-Bus system bus" in inhibitor.problem
    assert "no systemd-inhibit" in inhibitor.problem
    assert inhibitor.problem.endswith("the machine may sleep during a Run")


def test_turned_off_means_none_and_no_problem(standin):
    inhibitor = make_inhibitor(enabled=False)
    inhibitor.hold("work")

    assert inhibitor.backend == "none"
    assert inhibitor.problem is None
    assert not inhibitor.held
    assert standin.calls() == []


# -- macOS: caffeinate cannot run here, a stand-in records how it is called --


def test_caffeinate_is_asked_for_idle_sleep_only_and_to_watch_us(tmp_path):
    from owl.power.caffeinate import CaffeinateInhibitor

    record = tmp_path / "record"
    tool = tmp_path / "caffeinate"
    # Records its pid and argv, then waits the way caffeinate does.
    tool.write_text(
        f'#!/bin/sh\necho $$ "$@" > {record}.tmp\nmv {record}.tmp {record}\nexec sleep 60\n'
    )
    tool.chmod(0o755)
    inhibitor = CaffeinateInhibitor(tool=str(tool))

    inhibitor.hold("work")
    inhibitor.hold("work")
    _wait_for(record.exists)

    pid, *argv = record.read_text().split()
    assert argv == ["-i", "-w", str(os.getpid())]
    assert inhibitor.held
    inhibitor.release()
    assert not inhibitor.held
    assert not psutil.pid_exists(int(pid))


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(condition, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
