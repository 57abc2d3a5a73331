"""One daemon per Owl home, whatever the environment says of runtime folders.

The socket lives in a runtime folder that moves with XDG_RUNTIME_DIR and
TMPDIR (ssh, su, a desktop that came up later); the lock that keeps a home to
one daemon lives beside the database, and names the socket of the daemon
holding it. Each test runs the real `owl` command and daemon, at the
platform's own places (a throw-away HOME, no OWL_HOME) or under an OWL_HOME.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from owlproc import AGENT, OWL, make_project, wait_for


class Box:
    """A person's account in miniature: a HOME, two runtime folders and a
    temporary folder, with every daemon started in it ended afterwards."""

    def __init__(self, tmp: Path, owl_home: Path | None) -> None:
        self.home = tmp / "home"
        self.owl_home = owl_home
        self.tmpdir = tmp / "t"
        self.a, self.b = tmp / "a", tmp / "b"
        for d in (self.home, self.tmpdir, self.a, self.b):
            d.mkdir(parents=True)
            d.chmod(0o700)
        config = (owl_home or self.home / ".config" / "owl") / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            '[agents.script]\ncommand = ["%s", "%s", "{prompt}"]\n[agent]\ndefault = "script"\n'
            % (sys.executable, AGENT)
        )

    def env(self, runtime: Path | None) -> dict[str, str]:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("OWL_", "XDG_"))}
        e.update(HOME=str(self.home), TMPDIR=str(self.tmpdir), OWL_MACHINE="manual")
        if runtime is not None:
            e["XDG_RUNTIME_DIR"] = str(runtime)
        if self.owl_home is not None:
            e["OWL_HOME"] = str(self.owl_home)
        return e

    def owl(self, runtime: Path | None, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*OWL, *args], env=self.env(runtime), capture_output=True, text=True, timeout=90
        )

    def daemons(self) -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline", "environ"]):
            try:
                if (p.info["environ"] or {}).get("HOME") == str(self.home) and p.info["cmdline"][
                    -2:
                ] == ["owl", "daemon"]:
                    if p.status() != psutil.STATUS_ZOMBIE:
                        found.append(p)
            except (psutil.Error, TypeError):
                pass
        return found

    def end(self) -> None:
        for p in self.daemons():
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(20)
            except psutil.Error:
                pass


@pytest.fixture
def box(tmp_path: Path, request: pytest.FixtureRequest):
    where = request.param
    owl_home = None
    if where == "owl_home":
        owl_home = tmp_path / "owlhome"
    elif where == "deep_owl_home":  # too deep for sun_path: the socket moves to the runtime folder
        owl_home = tmp_path.joinpath(*["a-rather-long-folder-name"] * 5)
    b = Box(tmp_path, owl_home)
    yield b
    b.end()


def no_warning(p: subprocess.CompletedProcess) -> None:
    assert "Warning" not in p.stderr and "warnings.warn" not in p.stderr, p.stderr


@pytest.mark.parametrize("box", ["platform", "owl_home", "deep_owl_home"], indirect=True)
def test_a_second_daemon_under_another_runtime_folder_is_refused(box: Box, tmp_path: Path) -> None:
    first = box.owl(box.a, "daemon", "--detach")
    assert first.returncode == 0, first.stderr
    [daemon] = box.daemons()
    about = json.loads(box.owl(box.a, "daemon", "status", "--json").stdout)
    sock = about["socket"]
    if box.owl_home is None or "rather-long" in str(box.owl_home):
        assert sock.startswith(str(box.a)), sock  # the runtime folder A said

    again = box.owl(box.b, "daemon", "--detach")  # the environment says B
    assert again.returncode == 0, again.stderr
    assert f"already running (pid {daemon.pid}, socket {sock})" in again.stdout
    fg = box.owl(box.b, "daemon")
    assert fg.returncode == 1
    assert fg.stderr.count("\n") == 1 and f"pid {daemon.pid}, socket {sock}" in fg.stderr, fg.stderr
    assert fg.stderr.startswith("owl: another Owl daemon is already running for ")

    project = make_project(tmp_path / "proj")
    add = box.owl(box.b, "add", "--project", str(project), "sleep=0.1 exit=0")
    assert add.returncode == 0 and add.stdout.strip() == "1", add.stderr
    assert "started the daemon" not in add.stderr
    assert [p.pid for p in box.daemons()] == [daemon.pid]
    status = box.owl(box.b, "daemon", "status")
    assert status.returncode == 0 and f"pid {daemon.pid}" in status.stdout and sock in status.stdout
    st = json.loads(box.owl(box.b, "status", "--json").stdout)
    assert st["queue_length"] == 1
    for p in (first, again, fg, add, status):
        no_warning(p)

    stop = box.owl(box.b, "daemon", "stop")
    assert stop.returncode == 0 and f"pid {daemon.pid}" in stop.stdout, stop
    assert box.daemons() == []


@pytest.mark.parametrize("box", ["platform"], indirect=True)
def test_without_xdg_runtime_dir_no_warning_and_a_private_runtime_folder(box: Box) -> None:
    """ssh, su, a headless box: platformdirs falls back to TMPDIR/runtime-UID
    (here one an earlier Owl left 0755)."""
    runtime = box.tmpdir / f"runtime-{os.getuid()}"
    runtime.mkdir()
    runtime.chmod(0o755)
    for args in (("status",), ("daemon", "--detach"), ("daemon", "status"), ("status",)):
        p = box.owl(None, *args)
        no_warning(p)
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((runtime / "owl").stat().st_mode) == 0o700
    # and a shell that has XDG_RUNTIME_DIR now finds the same daemon, and starts none
    [daemon] = box.daemons()
    p = box.owl(box.a, "daemon", "--detach")
    assert f"already running (pid {daemon.pid}" in p.stdout, p
    assert [d.pid for d in box.daemons()] == [daemon.pid]


@pytest.mark.parametrize("box", ["platform", "owl_home"], indirect=True)
def test_a_daemon_holding_the_home_without_answering_is_said_and_none_started(
    box: Box, tmp_path: Path
) -> None:
    assert box.owl(box.a, "daemon", "--detach").returncode == 0
    [daemon] = box.daemons()
    sock = json.loads(box.owl(box.a, "daemon", "status", "--json").stdout)["socket"]
    os.unlink(sock)  # the daemon runs, holds the home, and cannot be reached
    project = make_project(tmp_path / "proj")
    add = box.owl(box.b, "add", "--project", str(project), "x")
    assert add.returncode == 1, add
    assert add.stderr.count("\n") == 1, add.stderr
    assert f"pid {daemon.pid}, socket {sock}" in add.stderr and "does not answer" in add.stderr
    detach = box.owl(box.a, "daemon", "--detach")
    assert detach.returncode == 1 and "does not answer" in detach.stderr, detach
    status = box.owl(box.a, "daemon", "status")
    assert status.returncode == 1 and f"pid {daemon.pid}" in status.stdout, status
    st = box.owl(box.a, "status")
    assert st.returncode == 3 and st.stdout.startswith("the daemon does not answer"), st
    assert "does not answer" in st.stderr
    assert [d.pid for d in box.daemons()] == [daemon.pid]  # none started beside it
    daemon.send_signal(signal.SIGTERM)
    wait_for(lambda: box.daemons() == [], timeout=20, what="the daemon to stop")
    # gone, its lock with it: the next add starts one
    add = box.owl(box.b, "add", "--project", str(project), "x")
    assert add.returncode == 0 and "started the daemon" in add.stderr, add


def test_the_log_says_a_daemon_stopped_and_not_that_a_run_that_finished_was_asked_to(
    tmp_path: Path,
) -> None:
    from owlproc import OwlDaemon

    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        assert d.proc is not None
        pid = d.proc.pid
        job = d.add("write=a commit=one exit=0", project)
        d.machine("idle")
        d.wait_job(job, "review")
        stopping = d.add("sleep=60", project)
        d.wait_run(stopping, "running")
        d.ok("stop", "--force")
        d.wait_job(stopping, "pending")
        assert d.stop() == 0
    log = d.log_text()
    assert log.count("asked to stop") == 1, log  # the Run that was stopped, only
    assert f"stopped (pid {pid})" in log, log


def test_a_daemon_that_ended_unreaped_is_not_taken_for_a_live_one() -> None:
    """Under a parent that does not reap (a container's first process), an
    ended daemon stays a zombie, which ``kill(pid, 0)`` still answers; the next
    daemon's lock file names it for an instant: it is no daemon holding the home."""
    from owl.settings import daemonlock

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        zombie = f"/proc/{pid}/stat"
        wait_for(lambda: open(zombie, "rb").read().rpartition(b")")[2].split()[0] == b"Z")
        assert not daemonlock.Holder(pid, "", daemonlock.READY).alive()
        assert daemonlock.Holder(os.getpid(), "", daemonlock.READY).alive()
    finally:
        os.waitpid(pid, 0)
