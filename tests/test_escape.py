"""No process of a Run escapes by shedding its tag.

An agent that runs ``( env -i setsid sh -c 'exec sleep 600' & )`` leaves a
grandchild with no OWL_RUN_ID, in a session of its own, whose parent is
gone. Every Run's agent starts under a reaper of its own (a child
subreaper), so that orphan lands in the Run's own tree: it is frozen with
the Run, and ended by the grace window, by a daemon stop and, should the
daemon be killed, by its watchdog.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from owlproc import OwlDaemon, make_project, wait_for
from support import nspids
from support.need import programs

# Each pid noted with its PID namespace (a contained Run has one of its own).
SCRIPT = """\
( env -i setsid sh -c 'echo "$(readlink /proc/self/ns/pid) $$" >> "{pids}"; exec sleep 600' & )
( env -i setsid sh -c '( sleep 600 & echo "$(readlink /proc/self/ns/pid) $!" >> "{pids}" ) ' & )
sleep 600
"""
# Uncontained, and in its sandbox (its own PID namespace, where the orphans go to
# the namespace's init, bwrap, rather than the Run's reaper outside it).
SANDBOX = pytest.mark.parametrize("sandbox", ["off", "required"])

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="child subreapers are Linux's"
)


def escaped(pids_file: Path) -> list[psutil.Process]:
    """The tag-less orphans the agent left, once both are there."""
    try:
        pids = nspids.host_pids(pids_file.read_text())
    except FileNotFoundError:
        return []
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if "OWL_RUN_ID" not in p.environ() and p.name() == "sleep":
                out.append(p)
        except psutil.Error:
            continue
    return out if len(out) == 2 else []


def gone(procs: list[psutil.Process]) -> bool:
    for p in procs:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def start(tmp_path: Path, sandbox: str = "off") -> tuple[OwlDaemon, int, list[psutil.Process]]:
    if sandbox != "off":
        programs("bwrap")
    home = tmp_path / "home"
    home.mkdir()
    noted = tmp_path / "escaped"  # outside OWL_HOME, which a contained Run cannot see
    noted.mkdir()
    script = tmp_path / "agent.sh"
    script.write_text(SCRIPT.format(pids=noted / "pids"))
    d = OwlDaemon(
        home,
        config={
            "agents": {"sh": {"command": ["/bin/sh", str(script)]}},
            "agent": {"default": "sh"},
            "power": {"keep_awake": False},
            "sandbox": {"mode": sandbox, "write": [str(noted)]},
        },
    )
    d.start()
    job = d.add("leave two orphans without the tag", make_project(tmp_path / "proj"))
    d.machine("idle")
    d.wait_run(job, "running")
    procs = wait_for(lambda: escaped(noted / "pids"), timeout=10, what="the orphans to start")
    return d, job, procs


@SANDBOX
def test_an_orphan_without_the_tag_is_frozen_and_ended_by_the_grace_window(tmp_path, sandbox):
    d, job, procs = start(tmp_path, sandbox)
    try:
        for p in procs:
            # no tag, a session of its own, its parent gone: it is the Run's reaper's
            # now (or, contained, its PID namespace's init: bwrap)
            assert os.getsid(p.pid) != os.getsid(p.parent().pid)
            adopter = "reaper.py" if sandbox == "off" else "bwrap"
            assert adopter in " ".join(p.parent().cmdline())
        d.machine("input")
        d.wait_run(job, "frozen", timeout=5)
        wait_for(
            lambda: all(p.status() == psutil.STATUS_STOPPED for p in procs),
            timeout=2,
            what="the orphans to be stopped",
        )
        d.wait_job(job, "pending", timeout=15)  # grace window 3 s, then TERM
        wait_for(lambda: gone(procs), timeout=5, what="the orphans to end")
    finally:
        d.__exit__(None, None, None)


@SANDBOX
def test_a_daemon_stop_ends_an_orphan_without_the_tag(tmp_path, sandbox):
    d, job, procs = start(tmp_path, sandbox)
    try:
        assert d.stop() == 0
        assert gone(procs)
    finally:
        d.__exit__(None, None, None)


@SANDBOX
def test_a_killed_daemon_s_watchdog_ends_an_orphan_without_the_tag(tmp_path, sandbox):
    d, job, procs = start(tmp_path, sandbox)
    try:
        d.machine("input")
        d.wait_run(job, "frozen", timeout=5)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(5)
        wait_for(lambda: gone(procs), timeout=15, what="the watchdog to end the orphans")
    finally:
        d.__exit__(None, None, None)


def cgroup_of(pid: int) -> str | None:
    """The process's cgroup v2 path; None once it has exited (a short-lived shell)."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return next(line[3:].strip() for line in fh if line.startswith("0::"))
    except FileNotFoundError:
        return None


def test_where_a_cgroup_can_be_made_each_run_has_its_own(tmp_path):
    from owl.tree import cgroup

    if cgroup.delegated_base() is None:
        pytest.skip("no delegated cgroup v2 here: the sweep alone is the path")
    d, job, procs = start(tmp_path)
    try:
        run = d.run_of(job)
        groups = ({cgroup_of(p.pid) for p in procs} | {cgroup_of(p) for p in run["pids"]}) - {None}
        assert len(groups) == 1
        [group] = groups
        assert group.endswith(f"/run-{run['id']}")
        # The Run's own folder, by where its processes are: other daemons on this
        # machine (other homes) have a run-1 of their own under the same base.
        own = Path(cgroup_of(os.getpid()))
        folder = cgroup.delegated_base() / Path(group).relative_to(own)
        assert folder.is_dir() and folder.parent.name.startswith("owl-")
        d.machine("input")
        d.wait_job(job, "pending", timeout=15)
        wait_for(lambda: gone(procs), timeout=5, what="the orphans to end")
        wait_for(lambda: not folder.exists(), timeout=5, what="the Run's cgroup removed")
    finally:
        d.__exit__(None, None, None)


def test_the_sweep_alone_still_catches_them_without_a_cgroup(tmp_path, monkeypatch):
    monkeypatch.setenv("OWL_CGROUP", "off")
    d, job, procs = start(tmp_path)
    try:
        d.machine("input")
        d.wait_run(job, "frozen", timeout=5)
        wait_for(
            lambda: all(p.status() == psutil.STATUS_STOPPED for p in procs),
            timeout=2,
            what="the orphans to be stopped",
        )
        assert d.stop() == 0
        assert gone(procs)
    finally:
        d.__exit__(None, None, None)
