"""Orphans without a child subreaper, as on macOS, through the posix backend.

macOS has no subreaper, so an orphan goes to launchd (pid 1), and the kernel
hides the environment of Apple's own binaries: psutil's environ() is empty
for /bin/sh and /bin/sleep, so the Run's tag cannot name them. Here the
portable backend runs with subreaping off (this test process is none) and
environ() made empty for /bin/* and /usr/bin/*, which is what macOS shows.
The fork watch uses kqueue, which Linux lacks: it runs against a stand-in
for the `select` module's kqueue API.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import pytest

from owl.tree import _platform, posix
from owl.tree.process_tree import ProcessTree
from test_tree import ALONE, NS_LAST_PID, can_set_last_pid, gone, status, wait_for

HIDDEN = ("/bin/", "/usr/bin/")


def hidden_environ(pid: int) -> dict[str, str] | None:
    """posix.environ, but empty for system binaries, as macOS reports them."""
    try:
        exe = psutil.Process(pid).exe()
    except psutil.Error:
        return None
    return {} if exe.startswith(HIDDEN) else posix.environ(pid)


def backend(**overrides: Any) -> types.ModuleType:
    b = types.ModuleType("macos_like")
    b.__dict__.update({k: v for k, v in vars(posix).items() if not k.startswith("__")})
    b.environ = hidden_environ
    b.__dict__.update(overrides)
    return b


@pytest.fixture
def tag() -> str:
    assert not _platform.adopting, "the test runner must not be a subreaper"
    return f"test-{uuid.uuid4().hex[:12]}"


class Strays(list[int]):
    """Pids a test left behind, each kept with its process's identity: some
    die during the test, and where a test moves the pid counter back, another
    test's new process may take a dead one's pid before this one's clean-up."""

    def __init__(self) -> None:
        super().__init__()
        self.procs: list[psutil.Process] = []

    def append(self, pid: int) -> None:
        super().append(pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            self.procs.append(psutil.Process(pid))

    def kill(self) -> None:
        for proc in self.procs:
            # psutil checks the start time first: a pid taken since is left alone
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


@pytest.fixture
def strays():
    pids = Strays()
    yield pids
    pids.kill()


def tool_shell(tag: str, *, new_session: bool = True) -> subprocess.Popen:
    """`sh -c 'sleep 300 & exit'`, held at a `read` until told to go, so the
    Run has seen the shell before it forks and exits."""
    return subprocess.Popen(
        ["/bin/sh", "-c", "read go; /bin/sleep 300 & echo $!; exit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "OWL_RUN_ID": tag},
        start_new_session=new_session,
    )


def orphan(sh: subprocess.Popen, strays: list[int]) -> int:
    """Let the shell fork its sleep and exit; returns the orphaned sleep."""
    assert sh.stdin is not None and sh.stdout is not None
    sh.stdin.write(b"go\n")
    sh.stdin.flush()
    pid = int(sh.stdout.readline())
    strays.append(pid)
    assert sh.wait(5) == 0
    wait_for(lambda: psutil.Process(pid).ppid() != sh.pid, what="re-parenting")
    assert psutil.Process(pid).ppid() == 1, "orphans must go to pid 1 (no subreaper above us)"
    assert hidden_environ(pid) == {}, "the tag is hidden, as macOS hides it"
    return pid


def test_untagged_orphan_in_the_runs_session_is_frozen_and_ended(tag, strays):
    sh = tool_shell(tag)
    run = ProcessTree(("OWL_RUN_ID", tag), sh.pid, backend=backend())
    sleeper = orphan(sh, strays)

    assert run.freeze() == 1
    assert status(sleeper) == psutil.STATUS_STOPPED
    assert run.is_frozen()
    assert run.kill() == 1
    assert gone(sleeper) and not run.alive()
    run.close()


def test_without_the_session_rule_the_orphan_escapes(tag, strays):
    """The same Run on a backend with no Kin: the orphan is lost."""
    sh = tool_shell(tag)
    run = ProcessTree(("OWL_RUN_ID", tag), sh.pid, backend=backend(Kin=None))
    sleeper = orphan(sh, strays)
    assert run.freeze() == 0
    assert status(sleeper) != psutil.STATUS_STOPPED
    run.close()


def test_orphans_of_other_sessions_and_of_the_daemons_own_are_not_taken(tag, strays):
    ours = tool_shell(tag)
    run = ProcessTree(("OWL_RUN_ID", tag), ours.pid, backend=backend())
    theirs = tool_shell(tag)  # a session the Run never had
    stranger = orphan(theirs, strays)
    shared = tool_shell(tag, new_session=False)  # the daemon's own session and group
    run2 = ProcessTree(("OWL_RUN_ID", tag), shared.pid, backend=backend())
    neighbour = orphan(shared, strays)
    mine = orphan(ours, strays)

    assert {p.pid for p in run.sweep()} == {mine}
    assert neighbour not in {p.pid for p in run2.sweep()}
    assert stranger not in {p.pid for p in run2.sweep()}
    run.kill()
    assert gone(mine) and not gone(stranger) and not gone(neighbour)
    run.close()
    run2.close()


# -- the fork watch, against a stand-in kqueue ---------------------------------


class KEvent(NamedTuple):
    ident: int
    filter: int = 0
    flags: int = 0
    fflags: int = 0


class FakeKqueue:
    """select.kqueue's control(): registrations are kept, events are what
    the test pushes, waited for up to the timeout."""

    def __init__(self, api: "FakeSelect") -> None:
        self.api = api
        self.events: queue.Queue[KEvent] = queue.Queue()
        self.closed = False

    def control(self, changes, max_events, timeout=None):
        for ev in changes or ():
            if not psutil.pid_exists(ev.ident):
                raise ProcessLookupError(3, "No such process")
            self.api.registered.append(ev)
        if not max_events:
            return []
        try:
            out = [self.events.get(timeout=timeout)]
        except queue.Empty:
            return []
        while len(out) < max_events and not self.events.empty():
            out.append(self.events.get_nowait())
        return out

    def close(self) -> None:
        self.closed = True


class FakeSelect:
    KQ_FILTER_PROC = -5
    KQ_EV_ADD = 0x1
    KQ_EV_CLEAR = 0x20
    KQ_NOTE_FORK = 0x40000000
    KQ_NOTE_EXIT = 0x80000000

    def __init__(self) -> None:
        self.registered: list[KEvent] = []
        self.queues: list[FakeKqueue] = []

    def kqueue(self) -> FakeKqueue:
        kq = FakeKqueue(self)
        self.queues.append(kq)
        return kq

    def kevent(self, ident, filter=0, flags=0, fflags=0) -> KEvent:
        return KEvent(ident, filter, flags, fflags)

    def push(self, pid: int, fflags: int) -> None:
        for kq in self.queues:
            kq.events.put(KEvent(pid, self.KQ_FILTER_PROC, 0, fflags))

    def watched(self) -> set[int]:
        return {ev.ident for ev in self.registered}


def kin_with(api: FakeSelect) -> Callable[..., posix.Kin]:
    return lambda on_fork=None: posix.Kin(on_fork, kqueue_api=api)


def test_a_fork_makes_the_tree_sweep_and_watch_the_child(tag):
    api = FakeSelect()
    agent = subprocess.Popen(
        ["/bin/sh", "-c", "read go; /bin/sleep 300 & read stop"],
        stdin=subprocess.PIPE,
        env={"OWL_RUN_ID": tag},
        start_new_session=True,
    )
    run = ProcessTree(("OWL_RUN_ID", tag), agent.pid, backend=backend(Kin=kin_with(api)))
    try:
        assert api.watched() == {agent.pid}
        (ev,) = api.registered
        assert ev.filter == api.KQ_FILTER_PROC
        assert ev.flags == api.KQ_EV_ADD | api.KQ_EV_CLEAR
        assert ev.fflags == api.KQ_NOTE_FORK | api.KQ_NOTE_EXIT

        agent.stdin.write(b"go\n")
        agent.stdin.flush()
        wait_for(lambda: psutil.Process(agent.pid).children(), what="the fork")
        (child,) = [p.pid for p in psutil.Process(agent.pid).children()]
        # Nobody asks the tree anything: the fork event alone makes it sweep.
        api.push(agent.pid, api.KQ_NOTE_FORK)
        wait_for(lambda: child in api.watched(), what="a sweep after the fork")
        assert (
            api.registered.count(
                api.kevent(
                    child,
                    api.KQ_FILTER_PROC,
                    api.KQ_EV_ADD | api.KQ_EV_CLEAR,
                    api.KQ_NOTE_FORK | api.KQ_NOTE_EXIT,
                )
            )
            == 1
        )
        assert run.kill() == 2
    finally:
        run.close()
        if agent.poll() is None:
            agent.kill()
        agent.wait(5)
    t0 = time.monotonic()
    wait_for(lambda: all(kq.closed for kq in api.queues), what="the kqueue closed")
    assert time.monotonic() - t0 < 2 * posix.ForkWatch.POLL + 0.5
    wait_for(
        lambda: not [t for t in threading.enumerate() if t.name == "owl-forkwatch"],
        what="the fork watch thread to end",
    )


def test_an_exit_event_lets_the_pid_be_watched_again_and_gone_pids_are_no_error():
    api = FakeSelect()
    sweeps = threading.Semaphore(0)
    kin = posix.Kin(sweeps.release, kqueue_api=api)
    try:
        me = os.getpid()
        kin.note([me, 999999999])  # the second is no process at all
        assert api.watched() == {me}
        kin.note([me])
        assert len(api.registered) == 1  # watched once
        api.push(me, api.KQ_NOTE_EXIT)
        api.push(me, api.KQ_NOTE_FORK)
        assert sweeps.acquire(timeout=5)
        kin.note([me])
        assert len(api.registered) == 2  # after its exit, a new process under that pid
    finally:
        kin.close()


def test_without_kqueue_there_is_no_fork_watch():
    kin = posix.Kin(lambda: None)
    assert kin.watching_forks is (hasattr(__import__("select"), "kqueue"))
    kin.close()


@ALONE
def test_a_session_id_reused_by_a_new_leader_is_no_evidence(tag, strays):
    """A session id cannot be reused while anything lives in it; once the
    Run's session is wholly gone, the id may name a new, unrelated session
    (forced here with ns_last_pid), whose processes are not the Run's."""
    if not can_set_last_pid():
        pytest.skip("cannot choose the next pid here (needs root)")
    sh = tool_shell(tag)
    kin = posix.Kin()
    kin.note([sh.pid])
    sleeper = orphan(sh, strays)
    assert kin.claims(sleeper)  # the leader is gone: the session is the Run's
    os.kill(sleeper, signal.SIGKILL)
    wait_for(lambda: not psutil.pid_exists(sleeper), what="the Run's session to end")
    leader = None
    for _ in range(20):
        NS_LAST_PID.write_text(str(sh.pid - 1))
        candidate = subprocess.Popen(
            ["/bin/sh", "-c", "/bin/sleep 300 & exec /bin/sleep 301"], start_new_session=True
        )
        if candidate.pid == sh.pid:
            leader = candidate
            break
        candidate.kill()
        candidate.wait()
    assert leader is not None, "another process took the pid each time"
    try:
        wait_for(lambda: psutil.Process(leader.pid).children(), what="the new session's child")
        (child,) = psutil.Process(leader.pid).children()
        strays.append(child.pid)
        assert os.getsid(child.pid) == sh.pid
        assert not kin.claims(child.pid)
    finally:
        leader.kill()
        leader.wait()
        kin.close()


def test_the_macos_backend_has_the_orphan_rule_and_linux_needs_none():
    from owl.tree import linux, macos

    assert macos.Kin is posix.Kin and macos.sweeper is posix.sweeper
    assert getattr(linux, "Kin", None) is None  # the subreaper keeps orphans there


def test_work_handed_to_launchd_is_named_never_claimed(tag, strays, tmp_path, monkeypatch):
    """`launchctl submit`, `open -a`, `brew services`: launchd starts the work,
    a child of pid 1 leading a session of its own, without the Run's tag. Here
    the process table is faked only in who the parent is: the processes are
    real. Named: this user's, a new session, started after the Run, not Apple's.
    Not named: one started before the Run, one in the daemon's session, and
    Apple's own (its folder counted as /System here)."""
    from owl.tray.notices import Notices
    from owl.tree import escaped

    tool = tmp_path / "mytool"
    tool.write_bytes(Path("/bin/sleep").read_bytes())
    tool.chmod(0o755)
    monkeypatch.setattr(escaped, "SYSTEM_PLACES", (*escaped.SYSTEM_PLACES, "/usr/bin/", "/bin/"))
    under_launchd: set[int] = set()

    def snapshot(since: int | None = None) -> dict:
        rows = posix.snapshot()
        return {
            pid: row._replace(ppid=1) if pid in under_launchd else row for pid, row in rows.items()
        }

    def start(argv: list[str], new_session: bool = True) -> int:
        p = subprocess.Popen(argv, env={}, start_new_session=new_session)
        strays.append(p.pid)
        under_launchd.add(p.pid)
        # Popen returns once exec has closed the child's fds, a moment before
        # the kernel has laid out the new argv: until then cmdline reads empty.
        # launchd's work is seen long after its start; wait for the argv here.
        wait_for(lambda: psutil.Process(p.pid).cmdline(), what="the new command line")
        return p.pid

    before = start([str(tool), "300"])
    time.sleep(0.05)
    agent = tool_shell(tag)
    run = ProcessTree(("OWL_RUN_ID", tag), agent.pid, backend=backend(snapshot=snapshot))
    time.sleep(0.05)
    handed = start([str(tool), "301"])
    start([str(tool), "302"], new_session=False)
    start(["/bin/sleep", "303"])

    assert run.freeze() == 1  # the agent's shell only
    named = run.refused()
    assert [p["pid"] for p in named] == [handed], (named, before)
    assert named[0]["why"] == escaped.WHY and "mytool 301" in named[0]["command"]
    assert status(handed) != psutil.STATUS_STOPPED, "not the Run's for sure: left running"
    notice = Notices().update(
        {
            "runs": [
                {
                    "id": 1,
                    "job_id": 4,
                    "state": "frozen",
                    "frozen_by": "input",
                    "untouchable": named,
                }
            ]
        }
    )
    assert any(f"pid {handed} (" in body and "escaped to launchd" in body for _, body in notice), (
        notice
    )

    os.kill(handed, signal.SIGKILL)
    wait_for(lambda: gone(handed), what="the handed work gone")
    run.alive()  # a sweep
    assert run.refused() == []
    run.kill()
    run.close()
