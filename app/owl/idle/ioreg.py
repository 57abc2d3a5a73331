"""macOS idle time: `HIDIdleTime` (nanoseconds) of the IOHIDSystem registry entry.

Asked only while the pynput hooks are not live (no Accessibility permission),
so spawning `ioreg` about once a second then is acceptable.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from .base import BackendError

COMMAND = ["ioreg", "-c", "IOHIDSystem", "-r", "-d", "1"]
_IDLE = re.compile(r'^[\s|]*"HIDIdleTime"\s*=\s*(\d+)', re.MULTILINE)  # a key of its own line


def parse_hid_idle_time(text: str) -> float:
    """Seconds of idle from `ioreg -c IOHIDSystem` output (first entry wins)."""
    match = _IDLE.search(text)
    if match is None:
        raise BackendError("ioreg printed no HIDIdleTime")
    return int(match.group(1)) / 1e9


class IoregReader:
    name = "ioreg"

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout

    def open(self) -> None:
        if shutil.which(COMMAND[0]) is None:
            raise BackendError("ioreg is not installed")
        self.idle_seconds()

    def idle_seconds(self) -> float:
        try:
            out = subprocess.run(
                COMMAND, capture_output=True, text=True, timeout=self.timeout, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendError(f"ioreg failed: {exc}") from None
        return parse_hid_idle_time(out)

    def close(self) -> None:
        pass
