"""The freeze holds for a Run of any size: thousands of processes in many
sessions, and a tree still forking, are stopped entirely, at a desktop's
soft limit of 1,024 open files; a signal that cannot be sent is retried and,
while it cannot, named, never silent; the kill holds at any size.

Each Run here is the real thing: `sleep`s and shells under a stand-in agent
(tests/agents/big_tree.py) whose heartbeat must stop writing while frozen.
The tree's side runs in tests/agents/freeze_probe.py (a child subreaper,
which the test runner must never become); the daemon's through the real
daemon started under `ulimit -S -n 1024`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from owlproc import OwlDaemon, make_project, wait_for
from support.need import missing

AGENTS = Path(__file__).parent / "agents"
PROBE = AGENTS / "freeze_probe.py"
BIG = AGENTS / "big_tree.py"
DESKTOP_NOFILE = 1024
#: Thousands of processes (a bomb among them) would take the cores from the
#: timed tests beside them: these run alone, after the parallel run.
ALONE = pytest.mark.isolated

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sweep's file descriptors are Linux's pidfds"
)


def probe(tmp_path: Path, *shape: str, cgroup: bool = False) -> dict:
    """Freeze (twice), thaw and kill a Run of the given shape; what was seen."""
    env = dict(os.environ, OWL_CGROUP="off")
    if cgroup:
        env.pop("OWL_CGROUP")
        env["OWL_PROBE_CGROUP"] = "1"
    heartbeat = tmp_path / "heartbeat"
    agent = [sys.executable, "-S", str(BIG), str(heartbeat), *shape]
    env["OWL_PROBE_TAG"] = tag = uuid.uuid4().hex
    try:
        done = subprocess.run(
            [sys.executable, str(PROBE), str(DESKTOP_NOFILE), str(heartbeat), "--", *agent],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        kill_tagged(tag)  # a probe that failed half way leaves thousands to init
    if cgroup and "no cgroup v2" in done.stderr:
        missing("no delegated cgroup v2 here")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def kill_tagged(tag: str) -> None:
    """SIGKILL every process that carries the Run's tag, until none is left."""
    for _ in range(50):
        found = []
        for p in psutil.process_iter(["environ"]):
            if (p.info["environ"] or {}).get("OWL_RUN_ID") == tag:
                found.append(p)
        if not found:
            return
        for p in found:
            try:
                p.kill()
            except psutil.Error:
                pass
        time.sleep(0.1)


def assert_held(seen: dict, at_least: int) -> None:
    for round_ in ("first", "again"):
        states = seen[f"{round_}_states"]
        running = {k: v for k, v in states.items() if k not in ("T", "Z")}
        assert not running, (round_, states)
        assert states.get("T", 0) >= at_least, (round_, states)
        assert seen[f"{round_}_not_stopped"] == 0, seen
        assert not seen[f"{round_}_heartbeat_grows"], f"the heartbeat went on while {round_} frozen"
        assert "T" not in seen[f"{round_}_thawed_states"], seen  # nothing left stopped
    # No descriptor per member: what is held is bounded by the budget.
    assert seen["handles_held"] <= seen["budget"] <= DESKTOP_NOFILE // 4, seen
    assert seen["again_fds"] <= seen["fds_before"] + seen["budget"] + 16, seen
    assert seen["left_after_kill"] == {}, seen
    assert seen["kill_s"] < 5.0, seen


@ALONE
@pytest.mark.timeout(300)
def test_a_run_of_3000_processes_in_many_sessions_is_stopped_entirely(tmp_path: Path) -> None:
    seen = probe(tmp_path, "sessions", "30", "100")
    assert_held(seen, 3000)


@ALONE
@pytest.mark.timeout(300)
def test_a_tree_still_forking_is_stopped_entirely(tmp_path: Path) -> None:
    """A bomb 3 wide and 6 deep (1,093 shells, each forking on and on)."""
    seen = probe(tmp_path, "bomb", "3", "6")
    assert_held(seen, 1093)


@ALONE
@pytest.mark.timeout(300)
def test_the_cgroup_path_stops_3000_processes_the_same(tmp_path: Path) -> None:
    seen = probe(tmp_path, "sessions", "30", "100", cgroup=True)
    assert_held(seen, 3000)


STARVED = textwrap.dedent(
    """
    import json, os, resource, signal, subprocess, sys, time, uuid
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from owl import tree

    tree.become_subreaper()
    tag = ("OWL_RUN_ID", uuid.uuid4().hex)
    env = dict(os.environ, **{tag[0]: tag[1]})
    script = "for i in $(seq 40); do sleep 600 & done; echo up; wait"
    p = tree.spawn(["sh", "-c", script], cwd="/", env=env, stdout=subprocess.PIPE, stderr=None)
    p.stdout.readline()
    t = tree.ProcessTree(tag, p.pid)
    while len(t.sweep()) < 41:
        time.sleep(0.05)

    def stopped():
        return sum(proc.status() == "stopped" for proc in t.sweep())

    # Every descriptor taken, as a leak or a burst of git calls would.
    hog = []
    while True:
        try:
            hog.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    t.freeze()
    starved = t.not_stopped()
    for fd in hog:
        os.close(fd)
    out = {"starved": starved, "stopped_while_starved": stopped()}
    t.freeze()  # the descriptors are back: this freeze holds
    out["after"] = t.not_stopped()
    out["stopped_after"] = stopped()
    t.thaw()
    out["stopped_after_thaw"] = stopped()
    t.kill()
    print(json.dumps(out))
    """
)


def test_a_stop_that_cannot_be_sent_is_named_then_retried(tmp_path: Path) -> None:
    """Out of file descriptors (every one taken by something else), a freeze
    cannot signal most of the Run: it says so, process by process, with
    why; once descriptors are free the next freeze stops them all."""
    done = subprocess.run(
        [sys.executable, "-c", STARVED],
        env=dict(os.environ, OWL_CGROUP="off"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["starved"], out
    assert all("Too many open files" in p["why"] for p in out["starved"]), out["starved"]
    assert out["stopped_while_starved"] < 41
    assert out["after"] == [] and out["stopped_after"] == 41, out
    assert out["stopped_after_thaw"] == 0, out


# ------------------------------------------------------------ the real daemon

AGENT_SCRIPT = (
    'git -c user.name=agent -c user.email=agent@example.com commit -q --allow-empty -m "kept" '
    '&& exec "$0" -S "$1" "$2" sessions 12 100'
)


class DesktopDaemon(OwlDaemon):
    """The daemon as a desktop session starts it: 1,024 open files at most."""

    def _spawn(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                ["sh", "-c", f'ulimit -S -n {DESKTOP_NOFILE} && exec "$@"', "sh", *self._argv()],
                env=self.env,
                stdout=logf,
                stderr=logf,
                stdin=subprocess.DEVNULL,
            )

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", "owl", *self.argv]


def states_of(pids: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pid in pids:
        try:
            st = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            st = "gone"
        out[st] = out.get(st, 0) + 1
    return out


def run_processes(daemon_pid: int) -> list[int]:
    """Every process under the daemon but its own helpers (its watchdog)."""
    out = []
    for child in psutil.Process(daemon_pid).children(recursive=True):
        try:
            if "watchdog" not in " ".join(child.cmdline()):
                out.append(child.pid)
        except psutil.Error:
            continue
    return out


@ALONE
@pytest.mark.timeout(300)
def test_the_daemon_freezes_and_kills_a_run_of_1200_at_a_desktops_file_limit(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "proj")
    heartbeat = tmp_path / "heartbeat"
    cfg = {
        "interruption": {"grace_window": "2s"},
        "agents": {
            "big": {
                "command": [
                    "sh",
                    "-c",
                    AGENT_SCRIPT,
                    sys.executable,
                    str(BIG),
                    str(heartbeat),
                    "{prompt}",
                ]
            }
        },
        "agent": {"default": "big"},
    }
    with DesktopDaemon(tmp_path / "home", cfg, env={"OWL_CGROUP": "off"}) as d:
        assert d.proc is not None
        job = d.add("go", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(lambda: heartbeat.exists(), timeout=120, what="1,200 processes up")
        pids = run_processes(d.proc.pid)
        assert len(pids) >= 1200, len(pids)
        limits = Path(f"/proc/{d.proc.pid}/limits").read_text()
        assert f"Max open files            {DESKTOP_NOFILE}" in limits, limits
        d.machine("input")
        run = d.wait_run(job, "frozen", timeout=30)
        assert run["not_stopped"] == [], run
        states = states_of(pids)
        assert set(states) <= {"stopped", "gone", "zombie"}, states
        size = heartbeat.stat().st_size
        time.sleep(0.5)  # the heartbeat writes every 20 ms while it runs
        assert heartbeat.stat().st_size == size, "the heartbeat went on while frozen"
        assert len(os.listdir(f"/proc/{d.proc.pid}/fd")) < DESKTOP_NOFILE // 2
        t0 = time.monotonic()
        j = d.wait_job(job, "pending", timeout=30)
        took = time.monotonic() - t0
        [r] = j["runs"]
        assert r["outcome"] == "interrupted" and r["ended_by"] == "sigkill", r
        assert took < 2 + 5 + 3, took
        assert states_of(pids).keys() <= {"gone", "zombie"}
        branch = subprocess.run(
            ["git", "-C", str(project), "log", "--format=%s", j["branch"]],
            capture_output=True,
            text=True,
        ).stdout.split("\n")
        assert "kept" in branch, branch


MOVER = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGUSR1, lambda *a: os.setpgid(0, 0))\n"
    "while True:\n"
    "    time.sleep(0.01)\n"
)


def test_a_process_that_left_its_group_after_the_sweep_is_stopped_all_the_same(
    tmp_path: Path,
) -> None:
    """The freeze stops a whole process group with one signal (through its
    leader's pidfd); a member that moved to a group of its own since the
    tree was last read missed it, and is stopped on its own."""
    from owl import tree

    tag = ("OWL_RUN_ID", uuid.uuid4().hex)
    script = (
        f'{sys.executable} -S -c "$0" & {sys.executable} -S -c "$0" & '
        "sleep 600 & sleep 600 & sleep 600 & wait"
    )
    popen = tree.spawn(
        ["sh", "-c", script, MOVER],
        cwd=str(tmp_path),
        env=dict(os.environ, OWL_RUN_ID=tag[1]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with tree.ProcessTree(tag, popen.pid) as run:
            wait_for(lambda: len(run.sweep()) == 6, what="the shell and its five")
            run.prepare()  # as the daemon's watch does after its sweep
            movers = [p for p in run.sweep() if p.name().startswith("python")]
            assert len(movers) == 2
            # each signalled once its handler is set (before, SIGUSR1 ends it)
            wait_for(
                lambda: all(catches(p.pid, signal.SIGUSR1) for p in movers),
                what="both movers ready for the signal",
            )
            for p in movers:
                p.send_signal(signal.SIGUSR1)
            wait_for(
                lambda: all(os.getpgid(p.pid) == p.pid for p in movers),
                what="both in groups of their own",
            )
            assert run.freeze() == 6
            for _ in range(20):  # a loaded machine may take more than a freeze's wait
                if not run.not_stopped():
                    break
                run.freeze()  # as the daemon's watch freezes again
            assert run.not_stopped() == []
            states = {p.pid: p.status() for p in run.sweep()}
            assert set(states.values()) == {psutil.STATUS_STOPPED}, states
            run.thaw()
            assert psutil.STATUS_STOPPED not in {p.status() for p in run.sweep()}
    finally:
        with tree.ProcessTree(tag, popen.pid) as run:
            run.kill()  # whatever happened above: nothing of it is left
        popen.wait(10)


def catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler of its own for `sig` (its SigCgt mask)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(line for line in f if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (sig - 1)))
