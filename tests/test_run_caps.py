"""A Run cannot take the machine: a contained Run held to `runs.memory`, to
`runs.processes` and to `runs.disk_floor`, for real.

Each cap twice where the machine allows: with the kernel holding it (here
cgroup v1 as root: `memory.limit_in_bytes`, `pids.max`) and with Owl's own
watch alone (`OWL_CGROUP=off`, as on macOS or a desktop with no delegation).
Either way: the Run is stopped, its reason names the cap and the figure, no
attempt is spent, the Job is blocked (nothing spent) when its next Run is
stopped too, the work it committed before is on its branch, and the daemon
answers as ever."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from escapes.harness import person
from owl.tree import cgroup_caps
from owlproc import OwlDaemon, make_project, wait_for
from support.need import missing, programs
from support.notify_servers import Receiver
from support.smalldisk import small_fs


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder of the test's own, readable by a second user. Under /tmp, which a
    contained Run sees as a tmpfs of its own but for its worktree; the Runs here
    see no /var/tmp (`sandbox.hide`), where the daemons of other tests come and
    go with their sockets, which a sandbox set up meanwhile would try to cover."""
    path = Path(tempfile.mkdtemp(prefix="owl-caps-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


SANDBOX = {"mode": "required", "hide": ["/var/tmp"]}  # contained, as by default
COMMIT = (
    'echo "work $OWL_RUN_ID" > "work-$OWL_RUN_ID.txt" && git add -A && '
    'git commit -qm "work before the cap" && echo committed\n'
)
# Grows to 600 MB in 10 MB steps, each page touched, then holds it.
GROW = r"""python3 - <<'PY'
import time
held = []
for i in range(60):
    held.append(bytearray(b"x" * (10 * 1024 * 1024)))
    time.sleep(0.02)
print("grew to 600 MB", flush=True)
time.sleep(600)
PY
"""
# Forks 200 sleepers, one every 10 ms, then waits.
FORK = r"""for i in $(seq 1 200); do (sleep 600 &) 2>/dev/null || echo "fork refused"; sleep 0.01; done
echo "forked 200"
sleep 600
"""


def _kernel_or_watch(kind: str, controller: str) -> dict[str, str]:
    """The daemon's environment for each path: the kernel's (a v1 hierarchy
    of `controller` we may write: root), or Owl's watch alone."""
    if kind == "watch":
        return {"OWL_CGROUP": "off"}
    if cgroup_caps._v1_base(controller) is None and not _v2_has(controller):
        missing(f"no cgroup here where Owl may set a {controller} cap (needs root or delegation)")
    return {}


def _v2_has(controller: str) -> bool:
    try:
        return controller in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        return False


def _daemon(base: Path, script: str, runs: dict, env: dict[str, str]) -> OwlDaemon:
    programs("bwrap", "git", "python3")
    path = base / "agent.sh"
    path.write_text("set -u\n" + COMMIT + script)
    return OwlDaemon(
        base / "owl",
        {
            "sandbox": SANDBOX,
            "agents": {"shell": {"command": ["bash", str(path)]}},
            "agent": {"default": "shell"},
            "runs": runs,
            "interruption": {"grace_window": "30s"},
        },
        env={"HOME": str(person(base)), "AGENT_PIDS": "", **env},
    )


def _held_twice(d: OwlDaemon, project: Path, cap: str, timeout: float = 120) -> dict:
    """Add the Job, let it run: the first Run stopped at the cap (no attempt
    spent), the next stopped too, the Job blocked saying so. Its view."""
    job = d.add("go", project)
    d.machine("idle")
    j = d.wait_job(job, "blocked", timeout=timeout)
    runs = j["runs"]
    assert len(runs) == 2, runs
    for run in runs:
        assert run["outcome"] == "interrupted", run
        assert run["reason"].startswith("stopped: ") and f"runs.{cap} = " in run["reason"], run
    assert j["attempts_left"] == 3, j  # no attempt spent
    assert f"raise runs.{cap}" in j["reason"] and "stopped twice in a row" in j["reason"], j
    # the work each Run committed before its stop is on the branch
    log = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(project), "log", "--format=%s", j["branch"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert log.count("work before the cap") == 2, log
    # the daemon answers, and says why in `owl status` (text and --json)
    st = d.status()
    said = [r for r in st["recent"] if r["job_id"] == job]
    assert said and said[0]["reason"] == runs[-1]["reason"], st["recent"]
    assert runs[-1]["reason"] in d.ok("status")
    return j


@pytest.mark.parametrize("kind", ["kernel", "watch"])
def test_a_run_that_grows_past_its_memory_cap_is_stopped(base: Path, kind: str) -> None:
    env = _kernel_or_watch(kind, "memory")
    project = make_project(base / "proj")
    d = _daemon(base, GROW, {"memory": "300M"}, env)
    with d:
        j = _held_twice(d, project, "memory")
        reason = j["runs"][0]["reason"]
        if kind == "kernel":
            # the kernel held the wall: its OOM kill is read as the cap (not as
            # "the agent exited 137"), or Owl's watch stopped it at the wall
            killed = [r["reason"] for r in j["runs"] if "the kernel ended a process" in r["reason"]]
            for r in j["runs"]:
                if "used " in r["reason"]:
                    assert float(r["reason"].split("used ", 1)[1].split(" ")[0]) < 320, r
            assert killed or all("used " in r["reason"] for r in j["runs"]), j["runs"]
        else:
            assert reason.startswith("stopped: used ") and "MiB of memory" in reason, reason
            used = float(reason.split("used ", 1)[1].split(" ", 1)[0])
            assert 300 <= used < 600, reason  # stopped on the way up, not at the end
        text = d.log_text()
        assert ("kernel holds its caps" in text) == (kind == "kernel"), text[-3000:]


@pytest.mark.parametrize("kind", ["kernel", "watch"])
def test_a_run_that_forks_past_its_process_cap_is_stopped(base: Path, kind: str) -> None:
    env = _kernel_or_watch(kind, "pids")
    project = make_project(base / "proj")
    with Receiver() as rx:
        d = _daemon(base, FORK, {"processes": 64}, env)
        d.write_config(
            {
                **tomllib.loads((d.home / "config.toml").read_text()),
                "notify": {"away": [rx.url()], "batch": "0s"},
            }
        )
        with d:
            j = _held_twice(d, project, "processes")
            assert "runs.processes = 64" in j["runs"][0]["reason"]
            pids = [p for r in d.status()["runs"] for p in r["pids"]]
            assert not pids  # every process of both Runs is gone
            # the phone was told, while the person was away, with the cap and the figure
            said = wait_for(
                lambda: (
                    [g["body"] for g in rx.got if "stopped at a cap" in g["body"]["message"]]
                    or [g["body"] for g in rx.got if "stopped at a cap" in g["body"]["title"]]
                ),
                timeout=90,
                what="the phone told of the stop",
            )
            text = " ".join(m["title"] + " " + m["message"] for m in said)
            assert "runs.processes = 64" in text, said


def test_the_caps_are_written_where_the_kernel_holds_them(base: Path) -> None:
    """cgroup v1 as root: the Run's own memory and pids cgroups, with its caps."""
    if cgroup_caps._v1_base("memory") is None or cgroup_caps._v1_base("pids") is None:
        missing("no writable cgroup v1 memory and pids hierarchies (needs root on cgroup v1)")
    caps = cgroup_caps.KernelCaps.make(None, "capstest", "1", 300 * 1024 * 1024, 64)
    try:
        assert caps.where == "cgroup v1" and len(caps.joins) == 2, caps
        read = {Path(j).parts[4]: Path(j) for j in caps.joins}
        assert (read["memory"] / "memory.limit_in_bytes").read_text().strip() == str(300 << 20)
        assert (read["pids"] / "pids.max").read_text().strip() == "64"
        memsw = read["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # RAM and swap together: swap is no way past the cap
            assert memsw.read_text().strip() == str(300 << 20)
        assert caps.oom_kills() == 0 and caps.forks_refused() == 0
    finally:
        caps.remove()
    assert not any(Path(j).exists() for j in caps.joins)


def test_off_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWL_CGROUP", "off")
    caps = cgroup_caps.KernelCaps.make(None, "capstest", "2", 300 * 1024 * 1024, 64)
    assert caps.where == "" and caps.joins == [] and caps.memory is None


# Fills its disk at 40 MB/s, 1 MB at a time, and keeps trying; says so if the
# disk was ever full. At a look a second (the engine's pass, before the disk
# watch) the floor below could be passed by up to 40 MB between two looks
# (21 MB measured, and the Job then never had room to start again); the disk
# watch looks ten times a second.
FILL = r"""python3 - <<'PY'
import time
full = False
with open("big.bin", "wb", buffering=0) as f:
    while True:
        try:
            f.write(b"\0" * 1048576)
        except OSError:
            if not full:
                print("the disk was full", flush=True)
            full = True
        time.sleep(0.025)
PY
"""


def test_a_run_that_fills_its_disk_is_held_and_nothing_is_lost(base: Path) -> None:
    """A Run fills the small disk that holds its worktree and Owl's home: it is
    frozen at once and held, its Job waits saying why, no Run starts while the
    disk is under the floor, and every record the daemon wrote is there."""
    mnt = base / "small"
    with small_fs(mnt, "64m", base):
        project = make_project(base / "proj")
        d = _daemon(base, FILL, {"disk_floor": "24M"}, {})
        # held by the floor through its grace window, twice: ten seconds each, not thirty
        cfg = tomllib.loads((base / "owl" / "config.toml").read_text())
        cfg["interruption"]["grace_window"] = "10s"
        d.home = mnt / "owl"  # its home, worktrees and database on the small disk
        d.home.mkdir()
        d.write_config(cfg)
        d.env["OWL_HOME"] = str(d.home)
        d.log = base / "daemon.log"
        (d.home / "theirs.bin").write_bytes(b"\1" * 8 * 1024 * 1024)  # room the person can give
        with d:
            d.ok("config", "check")
            job = d.add("go", project)
            d.machine("idle")
            [run] = wait_for(
                lambda: [r for r in d.status()["runs"] if r["state"] == "frozen"],
                timeout=60,
                what="the Run frozen by the floor",
            )
            assert run["frozen_by"] == "disk", run
            assert "under runs.disk_floor = 24M" in (run["stopped"] or ""), run
            assert run["stopped"] in d.ok("status")
            # held through its grace window, then ended: interrupted, nothing spent
            j = d.wait_job(job, "pending", timeout=60)
            assert j["runs"][0]["outcome"] == "interrupted", j
            assert "runs.disk_floor = 24M" in j["runs"][0]["reason"], j
            assert j["attempts_left"] == 3
            waiting = wait_for(lambda: d.status()["waiting"], what="the queue's wait")
            assert "runs.disk_floor" in waiting and "no Run starts" in waiting, waiting
            assert d.status()["runs"] == []  # nothing starts while the disk is low
            # the person makes room: the Job starts again, fills it again, and is blocked
            (d.home / "theirs.bin").unlink()
            j = d.wait_job(job, "blocked", timeout=90)
            assert [r["outcome"] for r in j["runs"]] == ["interrupted", "interrupted"], j
            assert "raise runs.disk_floor" in j["reason"], j
            assert j["attempts_left"] == 3
            landed = subprocess.run(
                [
                    "git",
                    "-c",
                    "safe.directory=*",
                    "-C",
                    str(project),
                    "log",
                    "--format=%s",
                    j["branch"],
                ],
                capture_output=True,
                text=True,
            ).stdout
            assert landed.count("work before the cap") == 2, landed
            for r in j["runs"]:  # held at the floor: the disk never filled under it
                log = d.ok("logs", str(job), "--run", str(r["id"]))
                assert "committed" in log and "the disk was full" not in log, log
        # every record the daemon wrote is in the database
        db = sqlite3.connect(d.home / "owl.db")
        rows = db.execute(
            "SELECT state, outcome, reason, ended_at FROM runs WHERE job_id=? ORDER BY id", (job,)
        ).fetchall()
        assert len(rows) == 2 and all(
            r[0] == "ended" and r[1] == "interrupted" and "disk_floor" in r[2] and r[3]
            for r in rows
        ), rows
        assert db.execute("SELECT state FROM jobs WHERE id=?", (job,)).fetchone() == ("blocked",)
        text = d.log_text()
        assert "could not record" not in text or "kept until there is room" in text, text[-3000:]
        assert "could not be recorded" not in text, text[-3000:]


def test_a_v2_cgroup_without_the_controllers_leaves_the_caps_to_v1_or_the_watch() -> None:
    """Here cgroup v2 has no memory or pids controller (they are bound to v1):
    the Run's v2 cgroup (its freeze and kill) gets no caps, and they go where
    the kernel can hold them, or to Owl's watch alone. (Where v2 has them, a
    systemd user manager's delegated cgroup, `memory.max`, `memory.high` and
    `pids.max` are written: tested on the desktop VM tier.)"""
    from owl.tree import cgroup

    group = cgroup.RunGroup.make("capstest", "3")
    if group is None:
        missing("no cgroup v2 Owl may manage here (needs root or delegation)")
    try:
        controllers = (group.path.parent / "cgroup.controllers").read_text().split()
        caps = cgroup_caps.KernelCaps.make(group, "capstest", "3", 300 * 1024 * 1024, 64)
        try:
            for name, file in (("memory", "memory.max"), ("pids", "pids.max")):
                if name in controllers:
                    continue  # a v2 that has it: written there
                assert not (group.path / file).exists()
                v1 = cgroup_caps._v1_base(name)
                assert any(j.startswith(str(v1)) for j in caps.joins) == (v1 is not None)
            if "memory" not in controllers and cgroup_caps._v1_base("memory") is None:
                assert caps.memory is None  # Owl's watch alone
        finally:
            caps.remove()
    finally:
        group.remove()


# Asks for 600 MB at once: the kernel meets the cap within one allocation.
GULP = r"""python3 -c 'import time; held = b"x" * (600 << 20); print("held", flush=True); time.sleep(600)'
"""


def test_a_process_the_kernel_ends_at_the_cap_is_the_cap_not_an_exit_137(base: Path) -> None:
    """Faster than any watch: the kernel's OOM kill inside the Run's cgroup is
    read as runs.memory (v1 memory.oom_control, v2 memory.events), so the Run
    is interrupted with the cap's reason and spends nothing, where it would
    have "failed: the agent exited with code 137"."""
    env = _kernel_or_watch("kernel", "memory")
    project = make_project(base / "proj")
    d = _daemon(base, GULP, {"memory": "300M"}, env)
    with d:
        j = _held_twice(d, project, "memory")
        for run in j["runs"]:
            assert "the kernel ended a process of the Run" in run["reason"], run
            assert run["exit_code"] not in (0, None), run  # ended, not finished


def test_a_daemon_of_an_ordinary_user_holds_its_runs_to_the_memory_cap(base: Path) -> None:
    """As a person's own daemon, with no cgroup it may write (no delegation
    here): Owl's watch alone holds a contained Run to runs.memory."""
    from support.users import UserOwl, chown_tree, second_user, shared_install

    programs("bwrap", "git", "python3")
    with second_user("c") as user:
        base.chmod(0o755)
        shared = shared_install(base / "lib")
        agent = base / "agent.sh"
        agent.write_text("set -u\n" + COMMIT + GROW)
        agent.chmod(0o755)
        project = make_project(base / "proj")
        chown_tree(project, user)
        d = UserOwl(
            base / "home",
            user,
            shared,
            config={
                "sandbox": SANDBOX,
                "agents": {"shell": {"command": ["bash", str(agent)]}},
                "agent": {"default": "shell"},
                "runs": {"memory": "300M"},
                "power": {"keep_awake": False},
            },
            env={"AGENT_PIDS": ""},
        )
        with d:
            j = _held_twice(d, project, "memory")
            assert "kernel holds its caps" not in d.log_text()
            for run in j["runs"]:
                used = float(run["reason"].split("used ", 1)[1].split(" ")[0])
                assert 300 <= used < 600, run
