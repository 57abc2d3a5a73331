"""The harness's reading of the pids the stand-in agents note, contained or not:
a real process in a real PID namespace of its own (bwrap), mapped to its host pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from owlproc import ROOT, wait_for
from support import nspids
from support.bwrapped import HOST_READ_ONLY
from support.need import programs

NOTE = (
    "import sys, time; sys.path.insert(0, {agents!r}); from agent import note_pid; "
    "import os; note_pid(os.getpid()); time.sleep(60)"
)


def test_a_host_line_and_a_bare_pid_are_host_pids() -> None:
    text = f"{nspids.HOST_NS} {os.getpid()}\n4242\nnot a line\n"
    assert nspids.host_pids(text) == [os.getpid(), 4242]


def test_a_contained_process_maps_to_its_host_pid_while_it_lives(tmp_path: Path) -> None:
    programs("bwrap")
    pids = tmp_path / "agent-pids"
    code = NOTE.format(agents=str(ROOT / "tests" / "agents"))
    # Laid out as a contained Run sees it: its own PID namespace and /tmp, the
    # pids folder bound writable (as `sandbox.write` does), and this checkout
    # and its interpreter readable wherever they lie (as a Run's own command is).
    p = subprocess.Popen(
        [
            "bwrap",
            "--die-with-parent",
            "--unshare-pid",
            *HOST_READ_ONLY,
        ]
        + ["--tmpfs", "/tmp", "--ro-bind", str(ROOT), str(ROOT)]
        + ["--bind", str(tmp_path), str(tmp_path), "--", sys.executable]
        + ["-c", code],
        env=dict(os.environ, AGENT_PIDS=str(pids)),
    )
    try:
        wait_for(lambda: pids.exists() and pids.read_text().endswith("\n"), what="the note")
        [(ns, inner)] = nspids.parse(pids.read_text())
        assert ns != nspids.HOST_NS
        [host] = nspids.host_pids(pids.read_text())
        assert host != inner
        assert psutil.Process(host).cmdline()[-2:] == ["-c", code]
        os.kill(host, signal.SIGKILL)
        p.wait(5)
        wait_for(lambda: nspids.host_pids(pids.read_text()) == [], what="the pid to map to nothing")
    finally:
        p.kill()
        p.wait(5)
