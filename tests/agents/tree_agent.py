"""A hostile agent for process-tree tests: it hides its tools in new
sessions and process groups, orphans them, ignores SIGTERM, and exits early.

Every process it makes writes ``READY_DIR/<role>-<pid>`` once it is in
place, so a test can wait for the whole tree without sleeping. Children are
forks (fast, and they inherit the flags); ``--exec-sleep`` adds one that
exec's a real program, to check what survives exec.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def ready(role: str) -> None:
    path = os.path.join(ARGS.ready, f"{role}-{os.getpid()}")
    with open(path + ".tmp", "w"):
        pass
    os.rename(path + ".tmp", path)


def idle() -> None:
    while True:
        signal.pause()


def child(body) -> int:
    """Fork; the child runs body() and never returns."""
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid


def leaf(role: str) -> None:
    ready(role)
    idle()


def session(role: str, kids: int) -> None:
    """A new session (like a Bash tool command) with children of its own."""
    os.setsid()
    for _ in range(kids):
        child(lambda: leaf(role + "gc"))
    ready(role)
    idle()


def orphan_maker() -> None:
    """Double fork + setsid: the middle process exits, the grandchild is
    re-parented to the nearest subreaper."""
    os.setsid()
    child(lambda: leaf("orphan"))
    os._exit(0)


def hopper() -> None:
    """On SIGUSR1: move to a new process group and start a child in a new
    session, then say so."""

    def hop(*_):
        os.setpgid(0, 0)
        child(lambda: (os.setsid(), leaf("hopped")))
        ready("hop")

    signal.signal(signal.SIGUSR1, hop)
    ready("hopper")
    idle()


def churn() -> None:
    """Keep starting short-lived children, each in a new session: a tree
    that changes while it is being frozen."""
    ready("churner")
    while True:
        child(lambda: (os.setsid(), time.sleep(0.02)))
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)


def exec_sleep() -> None:
    os.setsid()
    pid = child(lambda: os.execv("/bin/sleep", ["sleep", "3600"]))
    ready(f"sleeper{pid}")
    idle()


def main() -> int:
    if ARGS.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # survives exec too
    if ARGS.trap_term:
        # Trapped, noted, and ignored (the handler is kept by forks).
        signal.signal(signal.SIGTERM, lambda *_: ready("termed"))
    for _ in range(ARGS.setsid):
        child(lambda: session("sess", 1))
    if ARGS.orphan:
        child(orphan_maker)
    if ARGS.hop:
        child(hopper)
    if ARGS.exec_sleep:
        child(exec_sleep)
    if ARGS.churn:
        child(churn)
    if ARGS.fanout:
        sessions, per = ARGS.fanout
        for _ in range(per - 1):
            child(lambda: leaf("plain"))
        for _ in range(sessions - 1):
            child(lambda: session("fan", per - 1))
    ready("agent")
    if ARGS.exit is not None:
        if ARGS.exit_after:
            time.sleep(ARGS.exit_after)
        return ARGS.exit
    idle()
    return 0


parser = argparse.ArgumentParser()
parser.add_argument("--ready", required=True)
parser.add_argument("--setsid", type=int, default=0)
parser.add_argument("--orphan", action="store_true")
parser.add_argument("--hop", action="store_true")
parser.add_argument("--exec-sleep", action="store_true")
parser.add_argument("--churn", action="store_true")
parser.add_argument("--fanout", type=int, nargs=2, metavar=("SESSIONS", "PER"))
parser.add_argument("--trap-term", action="store_true")
parser.add_argument("--ignore-term", action="store_true")
parser.add_argument("--exit", type=int)
parser.add_argument("--exit-after", type=float, default=0.0)
ARGS = parser.parse_args()

if __name__ == "__main__":
    sys.exit(main())
