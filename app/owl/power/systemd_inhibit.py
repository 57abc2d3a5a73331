"""Keep a Linux machine awake with the ``systemd-inhibit`` tool, as a child.

The fallback for when logind cannot be asked directly (see
:mod:`owl.power.logind` for what is inhibited and why). The tool takes the
lock, runs a command, and lets the lock go when the command ends.

The lock must die with the daemon, even on SIGKILL. Rather than
``PR_SET_PDEATHSIG`` (which fires when the *thread* that spawned the child
exits, not the process, and needs a pre-exec hook that is unsafe in a threaded
daemon), the command is ``cat`` reading a pipe whose only writer is us:
whenever our end closes - release(), or the kernel tidying up a dead daemon -
``cat`` sees EOF and exits, and ``systemd-inhibit`` releases the lock. The
command first prints one line, which it can only do once the lock is taken;
that is how hold() knows it worked.
"""

from __future__ import annotations

import select
import shutil
import subprocess

from owl.power.base import InhibitError, Inhibitor
from owl.power.logind import MODE, WHAT, WHO

TOOL = "systemd-inhibit"
# Runs under the lock: say "taken", then wait for our pipe to close.
HOLDER = ["sh", "-c", "echo; exec cat >/dev/null"]
START_TIMEOUT_S = 3.0
STOP_TIMEOUT_S = 1.0


def unavailable(tool: str | None = None) -> str | None:
    """None if the tool can reach logind; otherwise one line saying why."""
    path = tool or shutil.which(TOOL)
    if path is None:
        return f"no {TOOL}"
    try:
        done = subprocess.run(
            [path, "--list", "--no-pager", "--no-legend"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{TOOL} failed ({exc})"
    if done.returncode != 0:
        return f"{TOOL} failed ({_first_line(done.stderr)})"
    return None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no reason given"


class SystemdInhibitInhibitor(Inhibitor[subprocess.Popen]):
    """An idle lock held by a ``systemd-inhibit`` child process."""

    backend = "systemd-inhibit"

    def __init__(self, tool: str | None = None, retry_after: float = 30.0) -> None:
        super().__init__(retry_after=retry_after)
        self._tool = tool or shutil.which(TOOL) or TOOL

    def _acquire(self, why: str) -> subprocess.Popen:
        argv = [
            self._tool,
            f"--what={WHAT}",
            f"--who={WHO}",
            f"--why={why}",
            f"--mode={MODE}",
            *HOLDER,
        ]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,  # our end is the lifeline
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise InhibitError(f"{TOOL}: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        if ready and proc.stdout.readline() == b"\n":
            return proc
        # No "taken" line: the tool failed (it says why on stderr) or hung.
        reason = _first_line(_stop(proc))
        raise InhibitError(f"{TOOL}: {reason}")

    def _drop(self, proc: subprocess.Popen) -> None:
        _stop(proc)

    def _alive(self, proc: subprocess.Popen) -> bool:
        return proc.poll() is None


def _stop(proc: subprocess.Popen) -> str:
    """End the tool (and with it the lock); return what it said on stderr."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()  # cat sees EOF, the tool lets the lock go
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    said = proc.stderr.read().decode(errors="replace")
    proc.stdout.close()
    proc.stderr.close()
    return said
