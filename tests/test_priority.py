"""spawn(): every process of a Run runs at the configured CPU and I/O
priority, including tools started in new sessions, and argv never passes
through a shell."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from owl import tree

AGENT = Path(__file__).parent / "agents" / "tree_agent.py"
LINUX = sys.platform.startswith("linux")


def autogroup_nice(pid: int) -> int | None:
    """The niceness of the session group `pid` is in ("/autogroup-7 nice 10"),
    or None where the kernel has no autogroups or `pid` is in none: a
    process whose session was never begun by setsid since boot (a
    container's first process and what it starts) reads an empty file, being
    in the kernel's root group, which has no weight of its own to write."""
    try:
        text = Path(f"/proc/{pid}/autogroup").read_text().split()
    except FileNotFoundError:
        return None
    return int(text[-1]) if text else None


def autogroups_on() -> bool:
    """Whether this kernel groups sessions; under CI a Linux kernel must, so
    a kernel without them cannot pass unseen."""
    have = Path("/proc/self/autogroup").exists()
    if os.environ.get("CI") == "true" and LINUX:
        assert have, "this kernel has no autogroups"
    return have


def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def tag():
    value = f"test-{uuid.uuid4().hex[:12]}"
    yield value
    tree.kill_processes(tree.find_survivors("OWL_RUN_ID", [value]))


@pytest.mark.parametrize("nice", [10, 7])
def test_every_process_of_the_tree_runs_at_the_configured_priority(tmp_path, tag, nice):
    env = dict(os.environ, OWL_RUN_ID=tag)
    popen = tree.spawn(
        [sys.executable, str(AGENT), "--ready", str(tmp_path), "--setsid", "1", "--exec-sleep"],
        cwd=str(tmp_path),
        env=env,
        stdout=None,
        stderr=None,
        nice=nice,
    )
    try:
        # agent, a setsid child and its child, a setsid child and the
        # `sleep` it exec'd
        wait_for(lambda: len([n for n in os.listdir(tmp_path) if not n.endswith(".tmp")]) == 4)
        sleeper = next(
            int(n.split("-")[0][len("sleeper") :])
            for n in os.listdir(tmp_path)
            if n.startswith("sleeper")
        )
        wait_for(lambda: psutil.Process(sleeper).name() == "sleep")
        own_group = autogroup_nice(os.getpid())
        pt = tree.ProcessTree(("OWL_RUN_ID", tag), popen.pid, nice=nice)
        procs = pt.sweep()
        assert len(procs) == 5
        assert len({os.getsid(p.pid) for p in procs}) == 3
        assert {p.pid: p.nice() for p in procs} == {p.pid: nice for p in procs}
        if autogroups_on():
            # each of the three sessions weighs as one process at `nice`,
            # the ones the agent made itself as well; ours is left as it was
            groups = {p.pid: autogroup_nice(p.pid) for p in procs}
            assert groups == {p.pid: nice for p in procs}
            assert autogroup_nice(os.getpid()) == own_group

        if LINUX:
            idle = psutil.IOPRIO_CLASS_IDLE
            assert {p.pid: p.ionice().ioclass for p in procs} == {p.pid: idle for p in procs}
        # The agent itself is what Popen holds (the priority tools exec'd
        # into it), in a session of its own.
        assert psutil.Process(popen.pid).cmdline()[1] == str(AGENT)
        assert os.getsid(popen.pid) == popen.pid
    finally:
        popen.kill()
        popen.wait()


@pytest.mark.skipif(not LINUX, reason="autogroups are Linux's")
def test_a_session_is_weighed_only_through_the_process_seen_and_never_ours(tmp_path):
    from owl.tree import linux

    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    inner = subprocess.Popen(["sleep", "60"])  # in our own session: never to be lowered
    try:
        row = linux.stat(child.pid)
        mine = linux.stat(inner.pid)
        assert row is not None and mine is not None
        own_group = autogroup_nice(os.getpid())
        assert not linux.set_session_nice(child.pid, row.start + 1, 12)  # a reused pid
        assert not linux.set_session_nice(inner.pid, mine.start, 12)  # in our session
        assert autogroup_nice(os.getpid()) == own_group
        if autogroups_on():
            assert linux.set_session_nice(child.pid, row.start, 12)
            assert autogroup_nice(child.pid) == 12
            assert autogroup_nice(os.getpid()) == own_group
    finally:
        for p in (child, inner):
            p.kill()
            p.wait()


def test_argv_is_passed_as_is_never_through_a_shell(tmp_path):
    out = tmp_path / "out"
    args = ["$HOME", "a b", "x; touch pwned", "`id`", "*"]
    with open(out, "w") as fh:
        popen = tree.spawn(
            [sys.executable, "-c", "import sys; print('\\n'.join(sys.argv[1:]))", *args],
            cwd=str(tmp_path),
            env={"PATH": os.environ["PATH"]},
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
        assert popen.wait(10) == 0
    assert out.read_text().splitlines() == args
    assert not (tmp_path / "pwned").exists()


def test_program_is_found_on_the_childs_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "only-here"
    tool.write_text("#!/bin/sh\nexit 5\n")
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    popen = tree.spawn(
        ["only-here"],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert popen.wait(10) == 5


def test_a_missing_program_is_a_clear_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-agent.*not found on PATH"):
        tree.spawn(
            ["no-such-agent", "-p", "x"],
            cwd=str(tmp_path),
            env={"PATH": "/usr/bin:/bin"},
            stdout=None,
            stderr=None,
        )
    with pytest.raises(FileNotFoundError, match="not found: .*/nowhere/agent"):
        tree.spawn(
            [str(tmp_path / "nowhere" / "agent")],
            cwd=str(tmp_path),
            env={},
            stdout=None,
            stderr=None,
        )
    with pytest.raises(FileNotFoundError, match="working directory"):
        tree.spawn(
            ["true"], cwd=str(tmp_path / "gone"), env=dict(os.environ), stdout=None, stderr=None
        )


def test_a_program_that_cannot_be_executed_is_a_clear_permission_error(tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with pytest.raises(PermissionError, match="not executable: .*agent.sh"):
        tree.spawn([str(script)], cwd=str(tmp_path), env={}, stdout=None, stderr=None)
    with pytest.raises(PermissionError, match="not executable"):
        tree.spawn(
            ["agent.sh"], cwd=str(tmp_path), env={"PATH": str(tmp_path)}, stdout=None, stderr=None
        )
    with pytest.raises(PermissionError, match="not executable"):
        tree.spawn([str(tmp_path)], cwd=str(tmp_path), env={}, stdout=None, stderr=None)


FIVE_SESSIONS = Path(__file__).parent / "agents" / "five_sessions.py"


@pytest.mark.skipif(not LINUX, reason="autogroups are Linux's")
def test_every_session_is_weighed_as_an_ordinary_user_within_the_kernels_limit(tmp_path):
    """An ordinary user may write one session's weight per 100 ms, machine-wide
    (EAGAIN until then): the sessions a sweep meets at once are all weighed,
    off the sweeping thread, in the time the limit takes."""
    import shutil
    import tempfile

    from support.users import second_user, shared_install

    if not autogroups_on():
        pytest.skip("this kernel has no autogroups")
    with second_user("nice") as user:
        root = Path(tempfile.mkdtemp(prefix="owl-nice-", dir="/tmp"))
        try:
            root.chmod(0o755)
            shared = shared_install(root / "lib")
            proc = subprocess.Popen(
                [sys._base_executable, "-c", FIVE_SESSIONS.read_text()],
                env={"PATH": os.environ["PATH"], "PYTHONPATH": str(shared), "HOME": str(root)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=str(root),
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=[],
            )
            try:
                assert proc.stdout is not None and proc.stdin is not None
                pids = [int(p) for p in proc.stdout.readline().split()]
                assert len(pids) == 5, pids
                # five writes, 100 ms apart at the least: well within a few seconds
                wait_for(lambda: [autogroup_nice(p) for p in pids] == [11] * 5, timeout=5)
                proc.stdin.close()
                assert proc.wait(10) == 0
            finally:
                proc.kill()
        finally:
            shutil.rmtree(root, ignore_errors=True)
