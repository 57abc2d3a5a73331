"""A Run of thousands of processes, for the freeze at any size.

    big_tree.py --heartbeat FILE sessions S PER     S sessions of PER sleeps each
    big_tree.py --heartbeat FILE bomb WIDTH DEPTH   a fork bomb capped by its shape

Every process ignores SIGTERM (only the kill ends it). The heartbeat is this
process appending a line to FILE every 20 ms: while the Run is frozen it
must stop growing. "sessions" is the wide tree a parallel build or a test
farm makes (each session a `setsid sh` whose sleeps are its children).
"bomb" is a tree WIDTH wide and DEPTH deep whose every node keeps starting
short-lived children (`true`) once its own are started, so that the tree
is still forking when the freeze comes; its size is bounded by its shape
(WIDTH**DEPTH leaves), never by the machine's limits (root ignores
`ulimit -u`, and a test that runs the pid space dry takes every other
test with it). It prints "ready N" once N processes are up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from proclinks import under  # a sibling: this script's folder is on its path

SESSION = "trap '' TERM; i=0; while [ $i -lt {per} ]; do sleep 600 & i=$((i+1)); done; wait"
# A node: its children first, then churn (one short-lived child at a time).
NODE = """trap '' TERM
d=$1
if [ "$d" -lt {depth} ]; then
  i=0; while [ $i -lt {width} ]; do sh -c "$0" "$0" $((d+1)) & i=$((i+1)); done
fi
while :; do /bin/true; sleep 1; done
"""


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    heartbeat, kind, a, b = argv[1], argv[2], int(argv[3]), int(argv[4])
    if kind == "sessions":
        for _ in range(a):
            subprocess.Popen(["sh", "-c", SESSION.format(per=b)], start_new_session=True)
        want = a * (b + 1)
    else:
        script = NODE.format(width=a, depth=b)
        subprocess.Popen(["sh", "-c", script, script, "0"], start_new_session=True)
        want = sum(a**d for d in range(b + 1))
    while len(under(os.getpid())) < want:
        time.sleep(0.1)
    print(f"ready {want}", flush=True)
    with open(heartbeat, "a") as fh:
        while True:
            fh.write(f"{time.time()}\n")
            fh.flush()
            time.sleep(0.02)


if __name__ == "__main__":
    main(sys.argv)
