"""An agent that writes MB megabytes to its output as fast as it can, touches
DONE_FILE, then (ignoring SIGTERM) sleeps: the log must stay capped."""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent import note_pid  # noqa: E402


def main(mb: int, done: str) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid(os.getpid())
    line = (b"x" * 1023) + b"\n"
    block = line * 1024  # 1 MB
    out = sys.stdout.buffer
    for _ in range(mb):
        out.write(block)
        out.flush()
    with open(done, "w") as f:
        f.write("done\n")
    time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2]))
