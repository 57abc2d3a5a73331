"""A scriptable stand-in agent. Its prompt is a list of steps, run in order:

    trap-term        ignore SIGTERM from here on
    setsid-child=S   start a grandchild in a session of its own that sleeps S s
                     (it also ignores SIGTERM when trap-term came before)
    tick=S           print a line every S s from here on, on a thread
    sleep=S          sleep S s
    until=PATH       wait until PATH exists (a test's go-ahead)
    write=NAME       write NAME in the worktree (cwd)
    commit=MSG       git add -A and commit with message MSG
    handoff=TEXT     write TEXT to .owl/HANDOFF.md
    pidfile=PATH     write this process's pid to PATH
    exit=N           exit with status N (default 0 at the end)

Every pid it starts is appended to $AGENT_PIDS when that is set, so tests can
check that nothing survives: as its PID namespace and its pid there, which a
contained Run's own namespace makes different from the host's (the harness maps
it back, tests/support/nspids.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


def note_pid(pid: int) -> None:
    """Note `pid`, of this process's PID namespace (a child it started shares it)."""
    path = os.environ.get("AGENT_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.readlink('/proc/self/ns/pid')} {pid}\n")


def main(prompt: str) -> int:
    note_pid(os.getpid())
    trap = False
    for step in prompt.split():
        name, _, arg = step.partition("=")
        if name == "trap-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            trap = True
        elif name == "setsid-child":
            code = (
                "import signal,time\n"
                + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if trap else "")
                + f"time.sleep({float(arg)})\n"
            )
            p = subprocess.Popen([sys.executable, "-S", "-c", code], start_new_session=True)
            note_pid(p.pid)
        elif name == "tick":
            period = float(arg)

            def ticker() -> None:
                n = 0
                while True:
                    n += 1
                    print(f"tick {n}", flush=True)
                    time.sleep(period)

            threading.Thread(target=ticker, daemon=True).start()
        elif name == "sleep":
            time.sleep(float(arg))
        elif name == "until":
            while not os.path.exists(arg):
                time.sleep(0.05)
        elif name == "write":
            with open(arg, "w") as f:
                f.write(f"written by run {os.environ.get('OWL_RUN_ID')}\n")
        elif name == "commit":
            subprocess.run(["git", "add", "-A"], check=True)
            subprocess.run(["git", "commit", "-q", "-m", arg.replace("_", " ")], check=True)
        elif name == "handoff":
            os.makedirs(".owl", exist_ok=True)
            with open(".owl/HANDOFF.md", "w") as f:
                f.write(arg.replace("_", " ") + "\n")
        elif name == "pidfile":
            with open(arg, "w") as f:
                f.write(str(os.getpid()))
        elif name == "exit":
            return int(arg)
        print(f"done {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
