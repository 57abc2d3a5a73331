"""A miniature daemon for process-tree tests that need a child subreaper,
or that reap children.

Becoming a subreaper changes the process for good (every orphan below it
comes back to it), and reaping in the test runner could take an exit
status another test waits for, so the tests run these in a child Python.
Each run plays one scenario and prints one JSON object with what it saw.

    tree_supervisor.py orphan READY_DIR TAG
    tree_supervisor.py reap READY_DIR TAG TRIALS
    tree_supervisor.py owners DIR -
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil

from owl import tree

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree_agent.py")


def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.02)


def roles(ready_dir: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name in os.listdir(ready_dir):
        if name.endswith(".tmp"):
            continue
        role, _, pid = name.rpartition("-")
        out.setdefault(role, []).append(int(pid))
    return out


def start(ready_dir: str, tag: str, *flags: str):
    env = dict(os.environ, OWL_RUN_ID=tag)
    return tree.spawn(
        [sys.executable, AGENT, "--ready", ready_dir, *flags],
        cwd=ready_dir,
        env=env,
        stdout=None,
        stderr=None,
    )


def orphan(ready_dir: str, tag: str) -> dict:
    """An orphan never seen by any sweep (its parent died first) is found
    through the tag, frozen with the Run and killed with it."""
    subreaper = tree.become_subreaper()
    agent = start(ready_dir, tag, "--orphan", "--setsid", "1")
    wait_for(lambda: {"agent", "orphan", "sess", "sessgc"} <= roles(ready_dir).keys())
    pids = [p for ps in roles(ready_dir).values() for p in ps]
    orphan_pid = roles(ready_dir)["orphan"][0]
    wait_for(lambda: psutil.Process(orphan_pid).ppid() == os.getpid())
    run = tree.ProcessTree(("OWL_RUN_ID", tag), agent.pid)
    frozen = run.freeze()
    statuses = {str(p): psutil.Process(p).status() for p in pids}
    is_frozen = run.is_frozen()
    killed = run.kill()
    agent.wait(5)
    tree.reap_orphans(lambda pid: pid == agent.pid)
    left = [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    return {
        "subreaper": subreaper,
        "orphan": orphan_pid,
        "frozen": frozen,
        "statuses": statuses,
        "is_frozen": is_frozen,
        "killed": killed,
        "left": left,
        "alive_after": run.alive(),
    }


def reap(ready_dir: str, tag: str, trials: int) -> dict:
    """Agents that exit 7 while a reaper loops over orphans concurrently:
    every Popen must still read 7, and the orphans must be reaped."""
    subreaper = tree.become_subreaper()
    popens: dict[int, object] = {}
    reaped: list[int] = []
    stop = threading.Event()

    def reaper() -> None:
        while not stop.is_set():
            reaped.extend(tree.reap_orphans(lambda pid: pid in popens))

    thread = threading.Thread(target=reaper)
    thread.start()
    codes = []
    orphans = []
    try:
        for i in range(trials):
            sub = os.path.join(ready_dir, str(i))
            os.mkdir(sub)
            agent = start(sub, tag, "--orphan", "--exit", "7")
            popens[agent.pid] = agent
            # Poll as an engine does between events, which leaves the
            # reaper time to act first if it were going to steal.
            wait_for(lambda: agent.poll() is not None)
            codes.append(agent.returncode)
            wait_for(lambda: "orphan" in roles(sub))
            orphan_pid = roles(sub)["orphan"][0]
            orphans.append(orphan_pid)
            # The orphan dies too, and is ours to reap.
            run = tree.ProcessTree(("OWL_RUN_ID", tag))
            run.kill()
            wait_for(lambda: orphan_pid in reaped)
    finally:
        stop.set()
        thread.join()
    zombies = [c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]
    return {
        "subreaper": subreaper,
        "codes": codes,
        "orphans": orphans,
        "reaped": reaped,
        "zombies": zombies,
    }


def owners() -> dict:
    """Four children exit; reap_orphans may take only the one nobody owns."""

    def exits(code: int, new_session: bool) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", f"raise SystemExit({code})"], start_new_session=new_session
        )

    told = exits(3, True)
    registered = exits(4, True)
    tree.own(registered)
    plain = exits(5, False)
    orphan_like = exits(6, True)
    kids = {"told": told, "registered": registered, "plain": plain, "orphan_like": orphan_like}
    wait_for(
        lambda: all(psutil.Process(p.pid).status() == psutil.STATUS_ZOMBIE for p in kids.values())
    )
    reaped = tree.reap_orphans(lambda pid: pid == told.pid)
    codes = {name: kids[name].wait(5) for name in ("told", "registered", "plain")}
    gone = not psutil.pid_exists(orphan_like.pid)
    again = tree.reap_orphans(lambda pid: False)
    orphan_like.poll()  # reads ECHILD: the status went to reap_orphans
    return {
        "reaped": reaped,
        "pids": {k: p.pid for k, p in kids.items()},
        "codes": codes,
        "orphan_like_gone": gone,
        "again": again,
    }


if __name__ == "__main__":
    scenario, ready_dir, tag, *rest = sys.argv[1:]
    if scenario == "orphan":
        result = orphan(ready_dir, tag)
    elif scenario == "owners":
        result = owners()
    else:
        result = reap(ready_dir, tag, int(rest[0]))
    print(json.dumps(result))
