"""An agent that daemonizes a child the classic way: fork, setsid, fork again,
the middle process exits, so the grandchild is an orphan in a session of its
own. The grandchild ignores SIGTERM and keeps writing to the Run's output.

Prompt "stay": the agent itself then sleeps (a Run to freeze and kill).
Prompt "leave": the agent exits 0 at once while the grandchild still holds
its stdout (the Run must still end, and end the grandchild).
"""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent import note_pid  # noqa: E402


def main(mode: str) -> int:
    note_pid(os.getpid())
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            note_pid(os.getpid())
            os.write(w, b"x")
            n = 0
            while True:
                n += 1
                print(f"still here {n}", flush=True)
                time.sleep(0.1)
        os._exit(0)
    os.read(r, 1)  # the grandchild is up and noted
    print("daemonized", flush=True)
    if mode == "leave":
        return 0
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "stay"))
