"""An agent that floods its output: BEFORE megabytes, then (once GO exists,
when given) AFTER megabytes more, then a last line `the end <run id>`.

    spill.py BEFORE [GO AFTER]
"""

import os
import sys
import time

LINE = b"x" * 1023 + b"\n"


def spill(mb: float) -> None:
    out = sys.stdout.buffer
    for _ in range(int(mb * 1024)):
        out.write(LINE)
    out.flush()


spill(float(sys.argv[1]))
if len(sys.argv) > 3:
    go, deadline = sys.argv[2], time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    spill(float(sys.argv[3]))
sys.stdout.buffer.write(f"the end {os.environ.get('OWL_RUN_ID')}\n".encode())
sys.stdout.flush()
