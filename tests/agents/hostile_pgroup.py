"""An agent whose processes keep changing process group, and one that moves
to a session of its own and hops groups there, so no sweep can rely on a
group or session it saw the time before. All ignore SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent import note_pid  # noqa: E402


def hop(home_group: int) -> None:
    """Alternate between a group of its own and `home_group`, every few ms."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid(os.getpid())
    mine = True
    while True:
        try:
            os.setpgid(0, 0 if mine else home_group)
        except OSError:
            pass
        mine = not mine
        time.sleep(0.003)


def main() -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid(os.getpid())
    leader_group = os.getpgid(0)
    for _ in range(4):
        if os.fork() == 0:
            hop(leader_group)
    if os.fork() == 0:
        os.setsid()  # a new session, then hop inside it
        session_group = os.getpgid(0)
        for _ in range(2):
            if os.fork() == 0:
                hop(session_group)
        hop(session_group)
    print("hopping", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
