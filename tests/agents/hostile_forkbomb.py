"""A bounded fork bomb: a tree three wide and three deep (40 processes), each
ignoring SIGTERM, whose 27 leaves keep forking short-lived children (each
leaf one every ~20 ms: about 1,300 forks a second in all).

Freezing it must converge (a stopped process cannot fork) and killing it must
leave nothing, however fast the leaves churn. Every long-lived pid is noted in
$AGENT_PIDS.
"""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent import note_pid  # noqa: E402

WIDTH, DEPTH = 3, 3


def node(depth: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid(os.getpid())
    if depth < DEPTH:
        for _ in range(WIDTH):
            if os.fork() == 0:
                node(depth + 1)
                os._exit(0)
        while True:
            time.sleep(1)
    while True:  # a leaf: churn
        pid = os.fork()
        if pid == 0:
            time.sleep(0.01)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)


if __name__ == "__main__":
    print("forking", flush=True)
    node(0)
