"""A process of a Run that Owl may not signal: the rest goes on around it.

Run as an ordinary user, an agent may start a program that becomes root (as
passwordless sudo does). The system then refuses Owl's signals to it (EPERM).
Owl leaves it alone, freezes and ends everything else as usual, names it in
`owl status` and the Run's record, and never leaves anything it could signal
stopped: not on pause, not at the end of the grace window, not when the
daemon is killed.

While the person is away, such a process is told on their channels (real
Apprise, to a local receiver), its command line (the agent's to write) shown
with control characters made visible and cut to a bound.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import shutil
from pathlib import Path

import psutil
import pytest

from owlproc import make_project, wait_for
from support.notify_servers import Receiver
from support.users import UserOwl, chown_tree, second_user, setuid_root_helper, shared_install

AGENT_SCRIPT = """\
"{helper}" 600 &
echo $! >> "$OWL_HOME/helpers"
sleep 600 &
wait
"""


@pytest.fixture(scope="module")
def world():
    with second_user("u") as user:
        root = Path(tempfile.mkdtemp(prefix="owl-eperm-", dir="/tmp"))
        helper = root / "become-root"
        try:
            root.chmod(0o755)
            shared = shared_install(root / "lib")
            helper = setuid_root_helper(root)
            script = root / "agent.sh"
            script.write_text(AGENT_SCRIPT.format(helper=helper))
            script.chmod(0o755)
            yield user, root, shared, helper, script
        finally:
            for proc in psutil.process_iter(["exe"]):
                if proc.info["exe"] == str(helper):
                    proc.kill()
            shutil.rmtree(root, ignore_errors=True)


def daemon(
    world, name: str, script: Path | None = None, config: dict | None = None
) -> tuple[UserOwl, Path]:
    user, root, shared, _, default_script = world
    project = make_project(root / f"proj-{name}")
    chown_tree(project, user)
    d = UserOwl(
        root / f"home-{name}",
        user,
        shared,
        config={
            "agents": {"sh": {"command": ["/bin/sh", str(script or default_script)]}},
            "agent": {"default": "sh"},
            "power": {"keep_awake": False},
            **(config or {}),
        },
    )
    return d, project


def helpers(d: UserOwl) -> list[psutil.Process]:
    """The root helpers the Runs started, once each has become root."""
    out = []
    try:
        pids = [int(x) for x in (d.home / "helpers").read_text().split()]
    except FileNotFoundError:
        return out
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.uids().real == 0:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def user_processes(user) -> list[psutil.Process]:
    """Every live process running as the user (what Owl may signal)."""
    out = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info["uids"]
        if (
            uids is not None
            and uids.real == user.pw_uid
            and proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            out.append(proc)
    return out


def state_of(proc: psutil.Process) -> str:
    """Its status, or "gone"."""
    try:
        return proc.status()
    except psutil.NoSuchProcess:
        return "gone"


def stopped(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.status() == psutil.STATUS_STOPPED:
                out.append(p)
        except psutil.Error:
            continue
    return out


def start_run(d: UserOwl, project: Path, count: int = 1) -> tuple[int, psutil.Process]:
    job = d.add("become root and sleep", project)
    d.machine("idle")
    d.wait_run(job, "running")
    found = wait_for(
        lambda: len(helpers(d)) >= count and helpers(d),
        timeout=10,
        what="the helper to become root",
    )
    return job, found[-1]


def test_pause_and_the_grace_window_go_on_past_a_process_that_became_root(world):
    user = world[0]
    d, project = daemon(world, "pause")
    with d:
        job, helper = start_run(d, project)
        p = d.owl("pause")
        assert p.returncode == 0, p.stderr
        run = d.wait_run(job, "frozen", timeout=5)
        # everything Owl may signal is stopped; the root helper runs on, named
        agents = [q for q in user_processes(user) if q.pid in run["pids"]]
        # (one listed a moment ago that is gone now was no process of a frozen Run)
        assert agents and all(state_of(q) in (psutil.STATUS_STOPPED, "gone") for q in agents)
        agents = [q for q in agents if state_of(q) != "gone"]
        assert agents
        assert helper.status() != psutil.STATUS_STOPPED
        named = run["untouchable"]
        assert [u["pid"] for u in named] == [helper.pid]
        assert "become-root" in named[0]["command"] and "root" in named[0]["why"]
        text = d.ok("status")
        assert f"left alone: pid {helper.pid}" in text
        # the grace window (3 s) passes: the Run ends, the rest goes
        jv = d.wait_job(job, "pending", timeout=15)
        last = jv["runs"][-1]
        assert last["outcome"] == "interrupted"
        assert [u["pid"] for u in last["untouchable"]] == [helper.pid]
        wait_for(
            lambda: (
                not [q for q in agents if q.is_running() and q.status() != psutil.STATUS_ZOMBIE]
            ),
            timeout=5,
            what="the agent's own processes to end",
        )
        assert not stopped(user_processes(user))
        assert helper.is_running() and helper.status() != psutil.STATUS_STOPPED
        # named once more, as left running by a finished Run; one line each
        st = d.status()
        assert [u["pid"] for u in st["recent"][0]["untouchable"]] == [helper.pid]
        assert "ended, but left running" in d.ok("status")
        assert "internal error" not in d.log_text()
        assert d.log_text().count(f"pid {helper.pid} (") == 1
        assert d.owl("resume").returncode == 0
        d.wait_run(job, "running")  # a new Run, with a new helper
        assert d.stop() == 0, d.log_text()


def test_a_daemon_killed_with_such_a_run_frozen_leaves_nothing_stopped(world):
    user = world[0]
    d, project = daemon(world, "kill")
    with d:
        job, helper = start_run(d, project)
        assert d.owl("pause").returncode == 0
        run = d.wait_run(job, "frozen", timeout=5)
        agents = [q for q in user_processes(user) if q.pid in run["pids"]]
        assert stopped(agents)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(5)
        # the watchdog ends the Run's processes past the one it may not touch
        wait_for(
            lambda: (
                not [q for q in agents if q.is_running() and q.status() != psutil.STATUS_ZOMBIE]
            ),
            timeout=15,
            what="the watchdog to end the frozen Run",
        )
        assert not stopped(user_processes(user))
        assert helper.is_running()
        wait_for(
            lambda: "was left running" in d.log_text(),
            timeout=10,
            what="the watchdog to name the process it left",
        )
        # the next start goes on from there, and the record names the helper
        d.start()
        jv = d.job(job)
        assert jv["runs"][-1]["outcome"] == "interrupted"
        assert [u["pid"] for u in jv["runs"][-1]["untouchable"]] == [helper.pid]
        assert json.loads(d.ok("status", "--json"))["paused"] is True
        assert d.stop() == 0


# Leaves a root helper behind, its command line full of control bytes and
# thousands of z, and exits once it is root: the Run's end must leave it alone.
LEAVES_ROOT = """\
"{helper}" 600 "$(printf '\\033[31m\\a')$(head -c 3000 /dev/zero | tr '\\0' z)" &
pid=$!
while [ "$(stat -c %u /proc/$pid)" != 0 ]; do sleep 0.01; done
echo $pid >> "$OWL_HOME/helpers"
"""


def test_a_process_owl_may_not_signal_is_told_while_away(world):
    _, root, _, helper, _ = world
    script = root / "leaves-root.sh"
    script.write_text(LEAVES_ROOT.format(helper=helper))
    script.chmod(0o755)
    with Receiver() as rx:
        d, project = daemon(world, "told", script, {"notify": {"away": [rx.url()], "batch": "0s"}})
        with d:
            job = d.add("become root and leave", project)
            d.machine("idle")
            [left] = wait_for(lambda: helpers(d), timeout=10, what="the helper to become root")
            got = wait_for(
                lambda: [g["body"] for g in rx.got if "may not stop" in g["body"]["title"]],
                timeout=20,
                what="the message",
            )
            [msg] = got
            assert msg["title"] == f"Owl: Job {job} left a process Owl may not stop", msg
            text = msg["message"]
            assert f"pid {left.pid} (" in text and "became root" in text
            assert "\x1b" not in text and "\x07" not in text
            assert "\\x1b[31m\\x07" in text  # the bytes shown, not sent
            command = text.split(" (", 1)[1].split("): ", 1)[0]
            assert len(command) <= 60 and command.endswith("…"), command
            assert left.is_running()  # left alone
            assert d.stop() == 0, d.log_text()
