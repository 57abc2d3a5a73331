"""The process tree of a Run, against real processes and real signals.

The agent is tests/agents/tree_agent.py, which hides processes in new
sessions and groups, orphans them, traps SIGTERM and churns children. Checks
that need a child subreaper run in tests/agents/tree_supervisor.py, so the
test runner itself never becomes one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from owl import tree
from owl.tree import posix
from owlproc import frozen_states

AGENTS = Path(__file__).parent / "agents"
AGENT = AGENTS / "tree_agent.py"
SUPERVISOR = AGENTS / "tree_supervisor.py"
LINUX = sys.platform.startswith("linux")
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")

#: A test that sets the machine's pid counter back runs alone (`isolated`): the
#: pids it hands out next are ones other tests' processes had, and a test that
#: checks that a pid it noted is gone would see a stranger there.
ALONE = pytest.mark.isolated


def can_set_last_pid() -> bool:
    """Whether this process may choose the next pid (root, or
    CAP_CHECKPOINT_RESTORE): the file is world-writable, writing is not."""
    try:
        NS_LAST_PID.write_text(NS_LAST_PID.read_text())
        return True
    except OSError:
        return False


# The platform backend, and on Linux the portable psutil one (what macOS
# runs) as well, so both paths are exercised here.
BACKENDS = [pytest.param(None, id=tree.BACKEND)]
if LINUX:
    BACKENDS.append(pytest.param(posix, id="posix"))


def wait_for(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def status(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def gone(pid: int) -> bool:
    return status(pid) in ("gone", psutil.STATUS_ZOMBIE)


class Agents:
    """Starts tree_agent.py Runs, each with its own ready folder."""

    def __init__(self, root: Path, tag: str) -> None:
        self.root = root
        self.tag = tag
        self.popens: list[subprocess.Popen] = []
        self.count = 0

    def start(
        self, *flags: str, expect: dict[str, int], env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen, Path]:
        self.count += 1
        ready = self.root / f"run{self.count}"
        ready.mkdir()
        environ = dict(os.environ, OWL_RUN_ID=self.tag, **(env or {}))
        popen = tree.spawn(
            [sys.executable, str(AGENT), "--ready", str(ready), *flags],
            cwd=str(ready),
            env=environ,
            stdout=None,
            stderr=None,
            nice=0,
        )
        self.popens.append(popen)
        wait_for(
            lambda: all(len(roles(ready).get(r, ())) >= n for r, n in expect.items()),
            what=f"tree ready {expect}",
        )
        return popen, ready


def roles(ready: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name in os.listdir(ready):
        if not name.endswith(".tmp"):
            role, _, pid = name.rpartition("-")
            out.setdefault(role, []).append(int(pid))
    return out


def pids_of(ready: Path, *names: str) -> list[int]:
    found = roles(ready)
    return [p for r in (names or found) for p in found.get(r, ())]


@pytest.fixture
def agents(tmp_path: Path):
    """Agents for one test; whatever is left of them is killed afterwards
    (by their tag, the way a daemon cleans up after a crash)."""
    tag = f"test-{uuid.uuid4().hex[:12]}"
    rig = Agents(tmp_path, tag)
    yield rig
    tree.kill_processes(tree.find_survivors("OWL_RUN_ID", [tag]))
    for popen in rig.popens:
        if popen.poll() is None:
            popen.kill()
        popen.wait(5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setsid_grandchildren_freeze_and_die_with_the_agent(agents, backend):
    popen, ready = agents.start("--setsid", "2", expect={"agent": 1, "sess": 2, "sessgc": 2})
    pids = pids_of(ready)
    assert len(pids) == 5
    # The grandchildren really are outside the agent's session and group.
    assert {os.getsid(p) for p in pids} != {os.getsid(popen.pid)}
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid, backend=backend)

    assert run.freeze() == 5
    assert {p: status(p) for p in pids} == {p: psutil.STATUS_STOPPED for p in pids}
    assert run.is_frozen()

    assert run.thaw() == 5
    wait_for(lambda: all(status(p) != psutil.STATUS_STOPPED for p in pids), what="thaw")
    assert not run.is_frozen()

    assert run.kill() == 5
    assert all(gone(p) for p in pids)
    assert not run.alive()
    assert popen.wait(5) == -signal.SIGKILL


def test_orphan_seen_before_its_parent_died_is_still_found(agents):
    popen, ready = agents.start("--setsid", "1", expect={"agent": 1, "sess": 1, "sessgc": 1})
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid)
    assert len(run.sweep()) == 3
    (parent,) = pids_of(ready, "sess")
    (orphan,) = pids_of(ready, "sessgc")
    os.kill(parent, signal.SIGKILL)
    wait_for(lambda: psutil.Process(orphan).ppid() != parent, what="re-parenting")

    assert orphan in {p.pid for p in run.sweep()}
    run.freeze()
    assert status(orphan) == psutil.STATUS_STOPPED
    run.kill()
    assert gone(orphan)


def run_supervisor(tmp_path: Path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(SUPERVISOR), args[0], str(tmp_path), *args[1:]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not LINUX, reason="only Linux has a child subreaper")
def test_double_fork_setsid_orphan_adopted_frozen_and_killed(tmp_path):
    tag = f"test-{uuid.uuid4().hex[:12]}"
    try:
        seen = run_supervisor(tmp_path, "orphan", tag)
    finally:
        tree.kill_processes(tree.find_survivors("OWL_RUN_ID", [tag]))
    assert seen["subreaper"]
    # agent, the setsid child and its child, and the orphan that no sweep
    # ever saw under its parent
    assert seen["frozen"] == 4
    assert set(seen["statuses"].values()) == {"stopped"}
    assert str(seen["orphan"]) in seen["statuses"]
    assert seen["is_frozen"]
    assert seen["killed"] == 4
    assert seen["left"] == [] and not seen["alive_after"]


@pytest.mark.skipif(not LINUX, reason="only Linux has a child subreaper")
def test_reaping_orphans_never_steals_an_agents_exit_status(tmp_path):
    tag = f"test-{uuid.uuid4().hex[:12]}"
    try:
        seen = run_supervisor(tmp_path, "reap", tag, "8")
    finally:
        tree.kill_processes(tree.find_survivors("OWL_RUN_ID", [tag]))
    assert seen["subreaper"]
    assert seen["codes"] == [7] * 8
    assert set(seen["orphans"]) <= set(seen["reaped"])
    assert seen["zombies"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_term_trapping_tree_survives_term_and_dies_with_kill(agents, backend):
    popen, ready = agents.start(
        "--trap-term", "--setsid", "1", expect={"agent": 1, "sess": 1, "sessgc": 1}
    )
    pids = pids_of(ready)
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid, backend=backend)
    run.freeze()

    assert run.term() == 3
    # Each process ran its handler (so TERM reached it, and SIGCONT woke it
    # from the freeze) and carried on.
    wait_for(lambda: len(roles(ready).get("termed", ())) == 3, what="TERM handled")
    assert all(status(p) not in ("gone", psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED) for p in pids)
    assert run.alive()

    assert run.kill() == 3
    assert all(gone(p) for p in pids)
    assert popen.wait(5) == -signal.SIGKILL


@pytest.mark.parametrize("backend", BACKENDS)
def test_term_ends_a_frozen_well_behaved_tree(agents, backend):
    popen, ready = agents.start("--setsid", "2", expect={"agent": 1, "sess": 2, "sessgc": 2})
    pids = pids_of(ready)
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid, backend=backend)
    run.freeze()
    assert run.is_frozen()

    assert run.term() == 5
    wait_for(lambda: not run.alive(), timeout=5, what="the tree to end on TERM")
    assert all(gone(p) for p in pids)
    assert popen.wait(5) == -signal.SIGTERM


def test_a_stale_identity_is_never_signalled(agents):
    """A remembered (pid, create_time) whose pid now belongs to another
    process start: nothing is signalled."""
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        real = psutil.Process(stranger.pid).create_time()
        run = tree.ProcessTree(("OWL_RUN_ID", agents.tag))
        run.add_leader(stranger.pid, create_time=real - 3.0)
        assert run.freeze() == 0
        assert run.kill() == 0
        assert not run.alive()
        assert status(stranger.pid) in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING)
        assert (
            tree.find_survivors("OWL_RUN_ID", [agents.tag], identities=[(stranger.pid, real - 3.0)])
            == []
        )
        stale = psutil.Process(stranger.pid)
        stale._create_time = real - 3.0  # as if recorded before a reuse
        assert tree.kill_processes([stale]) == 0
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


@ALONE
@pytest.mark.skipif(not LINUX, reason="needs /proc/sys/kernel/ns_last_pid")
def test_a_really_reused_pid_is_never_signalled(agents):
    """The tree saw process A; A dies and its pid goes to an unrelated B
    (forced with ns_last_pid). Freezing and killing the Run leave B alone."""
    if not can_set_last_pid():
        pytest.skip("cannot choose the next pid here (needs root)")
    a = subprocess.Popen(["sleep", "30"], env=dict(os.environ, OWL_RUN_ID=agents.tag))
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), a.pid)
    assert run.freeze() == 1
    a.kill()
    a.wait()
    b = None
    for _ in range(20):
        NS_LAST_PID.write_text(str(a.pid - 1))
        candidate = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]})
        if candidate.pid == a.pid:
            b = candidate
            break
        candidate.kill()
        candidate.wait()
    if b is None:
        pytest.skip("another process took the pid first")
    try:
        wait_for(lambda: status(b.pid) == psutil.STATUS_SLEEPING, what="B to start")
        assert run.freeze() == 0
        assert run.thaw() == 0
        assert run.kill() == 0
        assert status(b.pid) == psutil.STATUS_SLEEPING and b.poll() is None
    finally:
        b.kill()
        b.wait()


def test_find_survivors_by_tag_ignores_another_instance(agents):
    mine, mine_ready = agents.start(
        "--setsid", "1", env={"OWL_HOME": "/homes/a"}, expect={"agent": 1, "sess": 1, "sessgc": 1}
    )
    theirs, theirs_ready = agents.start(
        "--setsid", "1", env={"OWL_HOME": "/homes/b"}, expect={"agent": 1, "sess": 1, "sessgc": 1}
    )
    untagged = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]})
    try:
        created = psutil.Process(untagged.pid).create_time()
        found = tree.find_survivors(
            "OWL_RUN_ID",
            [agents.tag, "other"],
            identities=[(untagged.pid, created)],
            instance=("OWL_HOME", "/homes/a"),
        )
        assert sorted(p.pid for p in found) == sorted(pids_of(mine_ready) + [untagged.pid])

        assert tree.kill_processes(found) == 4
        assert all(gone(p) for p in pids_of(mine_ready) + [untagged.pid])
        assert not any(gone(p) for p in pids_of(theirs_ready))
        assert (
            tree.find_survivors("OWL_RUN_ID", [agents.tag], instance=("OWL_HOME", "/homes/a")) == []
        )
    finally:
        untagged.kill()
        untagged.wait()


def test_find_survivors_includes_untagged_descendants(agents):
    """A tool started with a clean environment loses the tag, not its parent."""
    popen, ready = agents.start("--exec-sleep", expect={"agent": 1})
    wait_for(lambda: any(r.startswith("sleeper") for r in roles(ready)), what="sleeper")
    sleeper = int(next(r for r in roles(ready) if r.startswith("sleeper"))[len("sleeper") :])
    found = {p.pid for p in tree.find_survivors("OWL_RUN_ID", [agents.tag])}
    assert sleeper in found and popen.pid in found


@pytest.mark.parametrize(
    "history", ["one-sweep", "two-sweeps", pytest.param("pids-wrapped", marks=ALONE)]
)
def test_a_process_that_changes_group_between_sweeps_is_caught(agents, history):
    """A process moves to a new group and starts a child in a new session
    after the tree was swept. With two full sweeps behind it, freeze reads
    only the pids started since; when the pid counter has gone back (it
    wrapped, or was set back), it must notice and read everything."""
    popen, ready = agents.start("--hop", expect={"agent": 1, "hopper": 1})
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid)
    assert len(run.sweep()) == 2
    if history != "one-sweep":
        assert run.alive()
    (hopper,) = pids_of(ready, "hopper")
    group = os.getpgid(hopper)
    if history == "pids-wrapped":
        if not (LINUX and can_set_last_pid()):
            pytest.skip("cannot set the pid counter back here (needs root)")
        # Back, below every pid of the tree: a machine just started may not be at 1000 yet.
        NS_LAST_PID.write_text(str(min(pids_of(ready, "agent", "hopper")) // 2))
    os.kill(hopper, signal.SIGUSR1)
    wait_for(lambda: "hop" in roles(ready) and "hopped" in roles(ready), what="the hop")
    (hopped,) = pids_of(ready, "hopped")
    assert os.getpgid(hopper) != group and os.getsid(hopped) == hopped
    if history == "pids-wrapped":
        assert hopped < min(pids_of(ready, "agent", "hopper"))

    assert run.freeze() == 3
    assert status(hopper) == status(hopped) == psutil.STATUS_STOPPED
    run.kill()
    assert gone(hopper) and gone(hopped)


def test_freeze_converges_on_a_tree_that_keeps_forking(agents):
    popen, ready = agents.start(
        "--churn", "--setsid", "1", expect={"agent": 1, "churner": 1, "sess": 1, "sessgc": 1}
    )
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid)
    assert run.alive() and run.alive()  # so freeze reads only what is new
    time.sleep(0.05)  # let the churn get going: the point of the test
    frozen = run.freeze()
    assert frozen >= 4
    # Every process stopped, or (on a machine too busy to have run it since
    # its signal) with its stop pending: none runs its own code again.
    members = {p.pid for p in run.sweep()}
    states = frozen_states(sorted(members))
    assert set(states.values()) <= {"stopped", "stop pending"}, states
    wait_for(run.is_frozen, 5, what="the stops pending taken")
    # Nothing of the Run still runs, and nothing new appears while frozen.
    for p in members:
        assert status(p) == psutil.STATUS_STOPPED
    assert {p.pid for p in run.sweep()} == members
    run.kill()
    assert not run.alive()


def test_identities_are_psutils_create_times(agents):
    popen, ready = agents.start("--setsid", "1", expect={"agent": 1, "sess": 1, "sessgc": 1})
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid)
    ids = run.identities()
    assert sorted(p for p, _ in ids) == sorted(pids_of(ready))
    for pid, created in ids:
        assert created == psutil.Process(pid).create_time()
    # A tree rebuilt from the database's identities finds the same Run.
    again = tree.ProcessTree(None)
    for pid, created in ids:
        again.add_leader(pid, create_time=created)
    assert sorted(again.identities()) == sorted(ids)
    assert again.kill() == 3


def test_gone_leader_and_empty_tree_are_not_errors(agents):
    popen, ready = agents.start("--exit", "0", expect={"agent": 1})
    popen.wait(5)
    run = tree.ProcessTree(("OWL_RUN_ID", agents.tag), popen.pid)
    assert (run.freeze(), run.thaw(), run.term(), run.kill()) == (0, 0, 0, 0)
    assert not run.alive() and not run.is_frozen() and run.identities() == []


def test_reap_orphans_takes_only_zombies_nobody_owns(tmp_path):
    """Which exited children reap_orphans may take: not one a Popen owns
    (told by owned(), or by own() for Popens started elsewhere), not one in
    our own session (a plain subprocess call that will wait for it); only
    the rest, as an adopted orphan would be. (In a child process: reaping
    here could take a status another test is waiting for.)"""
    seen = run_supervisor(tmp_path, "owners", "unused")
    assert seen["reaped"] == [seen["pids"]["orphan_like"]]
    assert seen["codes"] == {"told": 3, "registered": 4, "plain": 5}
    assert seen["orphan_like_gone"]
    assert seen["again"] == []
