"""Five sessions begun at once, as an agent's tools begin them (setsid), swept as
Owl's daemon sweeps them with niceness 11: prints their pids. Then, with
`--report`, prints each session's niceness once all read 11 (or after 10 s);
without, waits until its stdin closes (the test reads the groups meanwhile).

Run from source (`python -c`, `python -`): as another user, or inside the
desktop machine, where the tests' folder is not importable."""

import os
import subprocess
import sys
import time

from owl import tree

sh = subprocess.Popen(
    ["sh", "-c", "for i in 1 2 3 4; do setsid sleep 60 & done; exec sleep 60"],
    start_new_session=True,
)
# sweeps as the daemon's, until one is made after all five sessions began: a
# child that has not yet called setsid is read in sh's, a later sweep reads its own
pt = tree.ProcessTree(None, sh.pid, nice=11)
until = time.monotonic() + 60
while time.monotonic() < until:
    began = len({os.getsid(p.pid) for p in pt.sweep()}) == 5
    seen = pt.sweep()
    if began:
        break
    time.sleep(0.05)
pids = [p.pid for p in seen]


def nice(pid: int) -> str:
    with open(f"/proc/{pid}/autogroup") as f:
        return f.read().split()[-1]


if "--report" in sys.argv:
    deadline = time.monotonic() + 10
    while any(nice(p) != "11" for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(" ".join(nice(p) for p in pids))
else:
    print(" ".join(str(p) for p in pids), flush=True)
    sys.stdin.read()  # until the test has read the groups
sh.kill()
