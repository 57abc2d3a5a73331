"""Keep a Mac awake with ``caffeinate -i``, as a child process.

``-i`` prevents idle system sleep only: closing the lid and "Sleep" from the
Apple menu still work, the same line the Linux backend draws. ``-w <pid>``
makes caffeinate exit when the daemon does, however it ends, so the assertion
cannot outlive us.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from owl.power.base import InhibitError, Inhibitor

TOOL = "caffeinate"
STOP_TIMEOUT_S = 1.0


class CaffeinateInhibitor(Inhibitor[subprocess.Popen]):
    """An idle-sleep assertion held by a ``caffeinate`` child process."""

    backend = "caffeinate"

    def __init__(self, tool: str | None = None) -> None:
        super().__init__()
        self._tool = tool or shutil.which(TOOL) or TOOL

    def _acquire(self, why: str) -> subprocess.Popen:
        # caffeinate takes no reason; `why` is for the backends that show one.
        try:
            return subprocess.Popen(
                [self._tool, "-i", "-w", str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise InhibitError(f"{TOOL}: {exc}") from exc

    def _drop(self, proc: subprocess.Popen) -> None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _alive(self, proc: subprocess.Popen) -> bool:
        return proc.poll() is None
