"""A Run's caps on a real cgroup v2: the daemon as dev's user unit (`Delegate=yes`),
each Run in a cgroup of its own under the unit's, the kernel holding `runs.memory`
(`memory.max`, `memory.high`) and `runs.processes` (`pids.max`) there, and a frozen
Run's memory given back to swap through `memory.reclaim` (see conftest for the
machine). Each Run reads its own cgroup's limits from inside and prints them: what
the kernel holds it to, as the Run itself is held."""

from __future__ import annotations

import base64
import json

from system.conftest import OWL, Desktop
from system.test_desktop import RUN_ENDED, config, logged, service_on

UNIT = "/sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/app.slice/owl.service"

# The Run's own cgroup, as the Run sees it, and the limits the kernel holds it to.
LIMITS = r"""
cg = "/sys/fs/cgroup" + open("/proc/self/cgroup").read().strip().split("::", 1)[1]
print("cgroup", cg, flush=True)
for name in ("memory.max", "memory.high", "memory.swap.max", "pids.max"):
    print(name, open(f"{cg}/{name}").read().strip(), flush=True)
"""
# Grows by 4 MB every 50 ms, each page touched, to 512 MB; then holds it.
GROW = (
    "import time\n"
    + LIMITS
    + r"""
held = []
for i in range(128):
    held.append(bytearray(b"x") * (4 << 20))
    time.sleep(0.05)
print("grew to 512 MB", flush=True)
time.sleep(600)
"""
)
# Starts a sleeper every 20 ms, 100 of them; then waits.
FORK = (
    "import subprocess, time\n"
    + LIMITS
    + r"""
for i in range(100):
    try:
        subprocess.Popen(["sleep", "600"])
    except OSError as e:
        print("fork refused:", e, flush=True)
    time.sleep(0.02)
print("forked 100", flush=True)
time.sleep(600)
"""
)
# Holds 150 MB of its own, every page written; once told to go on (the file
# named by its argument), reads every byte back and ends.
HOLD = (
    "import os, sys, time\n"
    + LIMITS
    + r"""
held = bytearray(b"\x5a") * (150 << 20)
print("held", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.2)
print("intact" if held.count(0x5A) == len(held) else "LOST", flush=True)
"""
)


def put(path: str, text: str) -> str:
    """A shell line writing `text` to `path` in the machine, as it is."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d > {path}"


def capped(desktop: Desktop, home: str, script: str, runs: str, argv: str = "") -> None:
    """The home's config: an agent running `script` (python3), uncontained (the
    cgroup wraps the Run either way), `[runs]` as given; its daemon the unit's."""
    path = home.replace("$HOME", "/home/dev") + "/agent.py"
    desktop.sh(put(path, script))
    desktop.sh(
        config(
            home,
            f'[agents.capped]\ncommand = ["python3", "{path}"{argv}]\n'
            '[agent]\ndefault = "capped"\n[sandbox]\nmode = "off"\n'
            f"[runs]\n{runs}\n",
        )
    )
    service_on(desktop, home)


def owl(home: str, args: str) -> str:
    return f"export OWL_HOME={home}; {OWL} {args}"


def job_json(desktop: Desktop, home: str, job: str) -> dict:
    return json.loads(desktop.sh(owl(home, f"jobs show {job} --json")))


def held_at_the_cap(desktop: Desktop, home: str, cap: str) -> tuple[dict, str]:
    """Add a Job and start a Run of it: the Run stopped at the cap, no attempt
    spent, and the Job waits saying so, in `owl status` as well. The daemon the
    same process throughout, the unit never restarted. The Job's view, and the
    agent's output."""
    pid = json.loads(desktop.sh(owl(home, "daemon status --json")))["pid"]
    job = desktop.sh(owl(home, f"add --project {home}/proj -- go")).strip()
    desktop.sh(owl(home, "start"))
    logged(desktop, home, RUN_ENDED, f"the Run stopped at runs.{cap}", timeout=400)
    j = job_json(desktop, home, job)
    [run] = j["runs"]
    assert run["outcome"] == "interrupted", run
    assert run["reason"].startswith("stopped: ") and f"runs.{cap} = " in run["reason"], run
    assert j["state"] == "pending" and j["attempts_left"] == 3, j  # waits; nothing spent
    status = desktop.sh(owl(home, "status"))
    assert run["reason"] in status and "1 job waiting" in status, status
    # the daemon unharmed: the same process, the unit active, never restarted
    assert json.loads(desktop.sh(owl(home, "daemon status --json")))["pid"] == pid
    props = desktop.sh("systemctl --user show owl.service -p ActiveState -p NRestarts")
    assert "ActiveState=active" in props and "NRestarts=0" in props, props
    said = desktop.sh(f"grep 'kernel holds its caps' {home}/logs/owl.log")
    assert "(cgroup v2)" in said, said
    return j, desktop.sh(owl(home, f"logs {job} --raw"))


def limits(out: str) -> dict[str, str]:
    """What the Run printed of its own cgroup."""
    return dict(line.split(" ", 1) for line in out.splitlines() if line.count(" ") == 1)


def test_a_run_is_held_to_its_memory_cap_by_its_own_cgroup(desktop: Desktop, owl_home: str) -> None:
    capped(desktop, owl_home, GROW, 'memory = "64M"')
    j, out = held_at_the_cap(desktop, owl_home, "memory")
    seen = limits(out)
    assert "/app.slice/owl.service/owl-" in seen["cgroup"], out
    assert seen["cgroup"].endswith(f"/run-{j['runs'][0]['id']}"), out
    assert seen["memory.max"] == str(64 << 20), out
    assert seen["memory.high"] == str((64 << 20) - (4 << 20)), out
    assert seen["memory.swap.max"] == str(64 << 20), out
    assert "grew to 512 MB" not in out, out
    # the kernel's OOM kill at the wall, or Owl's watch just past it (an eighth)
    reason = j["runs"][0]["reason"]
    if "used " in reason:
        assert 64 < float(reason.split("used ", 1)[1].split(" ")[0]) < 100, reason
    else:
        assert "the kernel ended a process" in reason, reason


def test_a_run_is_held_to_its_process_cap_by_its_own_cgroup(
    desktop: Desktop, owl_home: str
) -> None:
    capped(desktop, owl_home, FORK, "processes = 32")
    j, out = held_at_the_cap(desktop, owl_home, "processes")
    assert limits(out)["pids.max"] == "32", out
    assert "forked 100" not in out, out
    assert "runs.processes = 32" in j["runs"][0]["reason"], j["runs"]
    # every process of the Run is gone, and its cgroup with it
    assert not desktop.sh(f"ls -d {UNIT}/owl-*/run-* 2>/dev/null; true").strip()


def test_a_frozen_runs_memory_goes_to_swap_and_the_thaw_carries_it_on(
    desktop: Desktop, owl_home: str
) -> None:
    h = owl_home
    go = h.replace("$HOME", "/home/dev") + "/go"
    capped(desktop, h, HOLD, 'memory = "512M"', argv=f', "{go}"')
    job = desktop.sh(owl(h, f"add --project {h}/proj -- hold")).strip()
    desktop.sh(owl(h, "start"))
    # the Run's own output, as the daemon writes it (what `owl logs` shows)
    desktop.wait(f"grep -qx held {h}/logs/1.log", "the Run to hold its memory", timeout=300)
    cg = limits(desktop.sh(f"cat {h}/logs/1.log"))["cgroup"]
    figures = f"cat {cg}/memory.current {cg}/memory.swap.current"
    before, swapped = map(int, desktop.sh(figures).split())
    assert before > 150 << 20, before
    desktop.sh(owl(h, "pause"))
    # given back while frozen: the cgroup's memory falls, its swap rises
    desktop.wait(
        f"set -- $({figures}); [ $1 -lt {before // 3} ] && [ $2 -gt {swapped + (100 << 20)} ]",
        "the frozen Run's memory given back to swap",
        timeout=180,
    )
    # (the daemon says so once the kernel's write returns: just after the fall)
    logged(desktop, h, r" run 1 frozen: [0-9]+ MB of its memory given back", "Owl's word of it")
    state = json.loads(desktop.sh(owl(h, "status --json")))["runs"][0]["state"]
    assert state == "frozen", state
    desktop.sh(owl(h, "resume") + f" && touch {go}")
    logged(desktop, h, RUN_ENDED, "the Run to end")
    j = job_json(desktop, h, job)
    assert j["runs"][0]["outcome"] == "succeeded", j["runs"]
    assert "intact" in desktop.sh(owl(h, f"logs {job} --raw")).split()
