"""Freeze a Run of any size as the daemon does, and report what a freeze left
running, read independently of the tree (run as a script: it becomes a child
subreaper, which the test runner itself must never be).

    freeze_probe.py NOFILE HEARTBEAT -- AGENT ARGV...

The soft open-file limit is set to NOFILE first (a desktop session's 1,024,
say), before Owl is imported, as it is for a daemon started there. With
OWL_PROBE_CGROUP=1 the Run gets a cgroup of its own, as the daemon gives one
where it can (else the sweep alone, as with OWL_CGROUP=off). The agent must print "ready N" once its N processes are up. The tree
is swept once (the daemon's watch sweeps every second), then frozen; every
process under this one is read from /proc and the heartbeat watched for
half a second; then the tree is thawed and frozen again, and killed. One
JSON line says what was seen.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import uuid

if __name__ == "__main__":
    _, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), _hard))

from owl import tree  # noqa: E402
from owl.tree import handles  # noqa: E402

import proclinks  # noqa: E402  (a sibling: this script's folder is on its path)


def states() -> dict[str, int]:
    """Every process under this one, by its state letter."""
    rows = proclinks.table()
    out: dict[str, int] = {}
    for pid in proclinks.under(os.getpid(), rows):
        st = rows[pid][1]
        if st == "D" and stop_pending(str(pid)):
            st = "T"  # acts on its stop before it runs again (a vfork parent)
        out[st] = out.get(st, 0) + 1
    return out


def stop_pending(pid: str) -> bool:
    """A SIGSTOP pending for the process (its own or its group's)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return False
    bit = 1 << (19 - 1)  # SIGSTOP
    return any(
        ln.startswith(("SigPnd:", "ShdPnd:")) and int(ln.split()[1], 16) & bit for ln in lines
    )


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def heartbeat_grows(path: str, span: float = 0.5) -> bool:
    before = os.path.getsize(path)
    time.sleep(span)
    return os.path.getsize(path) != before


def main(argv: list[str]) -> None:
    heartbeat, agent = argv[2], argv[4:]
    tree.become_subreaper()
    tag = ("OWL_RUN_ID", os.environ.get("OWL_PROBE_TAG") or uuid.uuid4().hex)
    env = dict(os.environ, **{tag[0]: tag[1]})
    group = None
    if os.environ.get("OWL_PROBE_CGROUP") == "1":
        group = tree.RunGroup.make(f"probe-{tag[1][:8]}", "1")
        if group is None:
            raise SystemExit("no cgroup v2 to make the Run's in")
    popen = tree.spawn(
        agent, cwd=os.getcwd(), env=env, stdout=subprocess.PIPE, stderr=None, cgroup=group
    )
    assert popen.stdout is not None
    line = popen.stdout.readline().decode()
    assert line.startswith("ready"), line
    while not os.path.exists(heartbeat):
        time.sleep(0.01)
    t = tree.ProcessTree(tag, popen.pid, cgroup=group)
    fds_small = fds()
    t.sweep()
    out: dict[str, object] = {"ready": int(line.split()[1]), "fds_before": fds_small}
    for round_ in ("first", "again"):
        t0 = time.perf_counter()
        frozen = t.freeze()
        out[f"{round_}_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out[f"{round_}_frozen"] = frozen
        out[f"{round_}_states"] = states()
        out[f"{round_}_not_stopped"] = len(t.not_stopped())
        out[f"{round_}_heartbeat_grows"] = heartbeat_grows(heartbeat)
        out[f"{round_}_fds"] = fds()
        t.thaw()
        out[f"{round_}_thawed_states"] = states()
    out["handles_held"] = handles.held()
    out["budget"] = handles.BUDGET
    t.term()
    t0 = time.monotonic()
    t.kill()
    out["kill_s"] = round(time.monotonic() - t0, 2)
    out["left_after_kill"] = {k: v for k, v in states().items() if k != "Z"}
    t.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv)
