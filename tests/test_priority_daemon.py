"""Low priority, end to end: every process of a Run started by the real daemon
runs at `runs.nice` and (Linux) in the idle I/O class, the tools it starts in
sessions of their own included, while the daemon itself keeps its own
priority.

The Run's processes are found here independently of the daemon's own sweep:
every live process whose environment carries this Run's `OWL_RUN_ID` and this
home's `OWL_INSTANCE`, checked against the pids the scriptable agent recorded.
"""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from owlproc import OwlDaemon, make_project, wait_for
from test_priority import autogroup_nice, autogroups_on

LINUX = sys.platform.startswith("linux")


def run_processes(run_id: int, instance: str) -> list[psutil.Process]:
    """Every live process tagged with this Run, whoever its parent or session."""
    found = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
            if (
                env.get("OWL_RUN_ID") == str(run_id)
                and env.get("OWL_INSTANCE") == instance
                and p.status() != psutil.STATUS_ZOMBIE
                and not any(a.endswith("reaper.py") for a in p.cmdline())
            ):
                found.append(p)  # (the Run's own reaper is not the agent's)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def assert_low_priority(
    d: OwlDaemon, job: int, nice: int, earlier: frozenset[int] = frozenset()
) -> list[psutil.Process]:
    """The Run of `job` (an agent with one setsid child) is all at `nice`;
    `earlier` are agent pids of Runs before it."""
    run = d.wait_run(job, "running")
    mine = wait_for(
        lambda: len(pids := set(d.agent_pids()) - earlier) == 2 and pids,
        what="the agent and its setsid child",
    )
    # This home's instance tag, as the daemon hands it to its agents.
    instance = psutil.Process(min(mine)).environ()["OWL_INSTANCE"]
    procs = wait_for(
        lambda: len(ps := run_processes(run["id"], instance)) == 2 and ps,
        what="both tagged processes",
    )
    assert {p.pid for p in procs} == mine
    # The child really is in a session (and group) of its own.
    assert len({os.getsid(p.pid) for p in procs}) == 2
    assert {p.pid: p.nice() for p in procs} == {p.pid: nice for p in procs}
    if LINUX:
        idle = psutil.IOPRIO_CLASS_IDLE
        assert {p.pid: p.ionice().ioclass for p in procs} == {p.pid: idle for p in procs}
    # The daemon's sweep sees the same processes.
    wait_for(
        lambda: sorted(d.run_of(job)["pids"]) == sorted(p.pid for p in procs),
        what="the daemon to list the same pids",
    )
    if autogroups_on():
        # and each session weighs as one process at `nice` against the
        # person's, the one the agent made for its child too
        assert {p.pid: autogroup_nice(p.pid) for p in procs} == {p.pid: nice for p in procs}
    return procs


@pytest.mark.parametrize("nice", [None, 7])
def test_every_process_of_a_run_is_at_the_configured_priority(home, project, nice):
    config = {"runs": {"nice": nice}} if nice is not None else {}
    expected = 10 if nice is None else nice
    with OwlDaemon(home, config) as d:
        daemon = psutil.Process(d.proc.pid)
        before = (daemon.nice(), daemon.ionice().ioclass if LINUX else None)
        group = autogroup_nice(daemon.pid)
        job = d.add("setsid-child=60 sleep=60", project)
        d.machine("idle")
        assert_low_priority(d, job, expected)
        # Only the Run is lowered: the daemon answers the person at its own priority.
        assert (daemon.nice(), daemon.ionice().ioclass if LINUX else None) == before
        assert daemon.nice() == os.getpriority(os.PRIO_PROCESS, 0)
        # nor is its session's weight (None where it is in the root group)
        assert group in (0, None)
        assert autogroup_nice(daemon.pid) == group


def test_a_new_nice_applies_to_the_next_run(home, project, tmp_path):
    with OwlDaemon(home) as d:
        first = d.add("sleep=0.2 exit=0", project)
        d.machine("idle")
        d.wait_job(first, "review")
        cfg = (home / "config.toml").read_text()
        (home / "config.toml").write_text(cfg + "\n[runs]\nnice = 15\n")
        wait_for(lambda: "nice = 15" in d.ok("config", "show"), what="the edit on disk")
        earlier = frozenset(d.agent_pids())
        second = d.add("setsid-child=60 sleep=60", make_project(tmp_path / "other"))
        assert_low_priority(d, second, 15, earlier)
