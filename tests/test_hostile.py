"""Agents that fight back, prompts built to escape, paths built to wander.

Each hostile agent (tests/agents/hostile_*.py) runs under the real daemon and
is frozen and killed on time while `owl status` keeps answering within a
second. Prompts reach the agent byte for byte and never a shell; nothing a
prompt, a project path or the config says can put a worktree or branch
outside Owl's own folder; the files Owl writes are private.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from owl.settings import config as configmod
from owl.control import client
from owl.settings.paths import socket_in
from owl.engine.live import LOG_CAP
from owlproc import OwlDaemon, Unmet, process_states, wait_for
from support.need import programs

AGENTS = Path(__file__).parent / "agents"
PY = sys.executable
# Long enough that the checks made while the Run is frozen (a few `owl` and
# socket round trips on a loaded machine) end before the window does.
GRACE = 3.0
KILL_DELAY = 5.0  # the lifecycle's fixed SIGTERM -> SIGKILL delay


def hostile(name: str, *args: str) -> dict:
    return {"command": [PY, str(AGENTS / f"hostile_{name}.py"), *args]}


class StatusProbe:
    """Asks `owl status --json` (the real command) over and over on a thread
    and keeps the longest time it took, to show the daemon stays responsive
    while an agent fights."""

    def __init__(self, d: OwlDaemon) -> None:
        self.d = d
        self.times: list[float] = []
        self.socket_times: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            p = self.d.owl("status", "--json", timeout=10)
            self.times.append(time.monotonic() - t0)
            if p.returncode != 0:
                self.failures.append(p.stderr)
            t0 = time.monotonic()
            client.ask(socket_in(self.d.home / "run"), "status", {})
            self.socket_times.append(time.monotonic() - t0)
            self._stop.wait(0.2)

    def __enter__(self) -> "StatusProbe":
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(15)


def run_now(d: OwlDaemon, job: int) -> dict | None:
    """The Job's live Run as the daemon says it this moment (over the socket:
    one round trip, not an interpreter start)."""
    st = client.ask(socket_in(d.home / "run"), "status", {})
    return next((r for r in st["runs"] if r["job_id"] == job), None)


def live_pids(d: OwlDaemon) -> list[int]:
    return [
        p
        for p, s in process_states(d.agent_pids()).items()
        if s not in ("gone", psutil.STATUS_ZOMBIE)
    ]


def all_stopped(d: OwlDaemon, run_pids: list[int]) -> bool:
    """Every process of the Run (as the daemon lists it, and every one the
    agents noted) is stopped, or already gone."""
    states = process_states(sorted(set(run_pids) | set(d.agent_pids())))
    return all(s in (psutil.STATUS_STOPPED, "gone", psutil.STATUS_ZOMBIE) for s in states.values())


# ------------------------------------------------------------ agents that fight

CASES = {
    # name: (agent config, prompt, processes the agent notes before it is "up")
    "ignores-term": (
        {"command": [PY, str(AGENTS / "agent.py"), "{prompt}"]},
        "trap-term setsid-child=60 tick=0.1 sleep=60",
        2,
    ),
    "fork-bomb": (hostile("forkbomb"), "go", 40),
    "double-fork": (hostile("daemonize", "stay"), "go", 2),
    "group-hopper": (hostile("pgroup"), "go", 8),
}


#: The cases that churn little, fought side by side in one daemon, each both
#: uncontained and in its sandbox (its own PID namespace); the fork bomb, which
#: takes both cores, alone in each.
SIDE_BY_SIDE = [
    (case, mode) for case in CASES if case != "fork-bomb" for mode in ("off", "required")
]


@pytest.mark.parametrize(
    "fights",
    [SIDE_BY_SIDE, [("fork-bomb", "off")], [("fork-bomb", "required")]],
    ids=["side-by-side", "fork-bomb-off", "fork-bomb-required"],
)
def test_hostile_agents_are_frozen_and_killed_on_time(
    tmp_path: Path, project: Path, fights: list[tuple[str, str]]
) -> None:
    """Uncontained, and in its sandbox: the same guarantee for every agent."""
    if any(mode != "off" for _, mode in fights):
        programs("bwrap")
    agents = {f"{case}-{mode}": (case, mode) for case, mode in fights}
    cfg = {
        "interruption": {"grace_window": f"{GRACE:g}s"},
        "runs": {"max_parallel": len(agents)},
        # each agent's own mode; the harness's pid file where a contained one can write
        "sandbox": {"mode": "required" if any(m != "off" for _, m in fights) else "off"},
        "agents": {
            name: {**CASES[case][0], "sandbox": {"mode": mode}}
            for name, (case, mode) in agents.items()
        },
    }
    with OwlDaemon(tmp_path / "home", cfg) as d:
        jobs = {
            d.add(CASES[case][1], project, "--agent", name): name
            for name, (case, _) in agents.items()
        }
        d.machine("idle")
        for job, name in jobs.items():
            running = d.wait_run(job, "running")
            contained = (running.get("contained") or "").startswith("contained: bwrap")
            assert contained == (agents[name][1] != "off"), (name, running)
        n = sum(CASES[case][2] for case, _ in fights)
        wait_for(lambda: len(live_pids(d)) >= n, timeout=15, what=f"{n} processes up")
        time.sleep(0.3)  # let them churn, hop, fork
        # From the person's return on, `owl status` must answer at once. (Before
        # it, a running fork bomb of 40 processes at nice 10 together outweighs
        # one interpreter starting at nice 0; nobody is there to wait then.)
        probe = StatusProbe(d).__enter__()
        d.machine("input")

        def frozen() -> list[dict] | Unmet:
            runs = [run_now(d, job) for job in jobs]
            return runs if all(r and r["state"] == "frozen" for r in runs) else Unmet(runs)

        pids = [
            pid for r in wait_for(frozen, timeout=15, what="every Run frozen") for pid in r["pids"]
        ]
        wait_for(lambda: all_stopped(d, pids), timeout=3, what="every process stopped")
        # stays frozen: nothing they started gets to run
        time.sleep(0.3)
        runs = frozen()
        assert runs, runs  # still within the grace window
        assert all_stopped(d, [pid for r in runs for pid in r["pids"]])
        t0 = time.monotonic()
        for job, name in jobs.items():
            j = d.wait_job(job, "pending", timeout=GRACE + KILL_DELAY + 10)
            took = time.monotonic() - t0
            [r] = j["runs"]
            assert r["outcome"] == "interrupted" and r["ended_by"] == "sigkill", (name, r)
            assert took < GRACE + KILL_DELAY + 2.5, (name, took)
        assert live_pids(d) == []
        probe.__exit__()
    print(
        f"{', '.join(agents)}: frozen to killed {took:.2f} s; owl status max {max(probe.times):.3f} s, "
        f"daemon round trip max {max(probe.socket_times):.3f} s"
    )
    assert probe.failures == []
    # The daemon itself must answer at once throughout.
    assert max(probe.socket_times) < 1.0, sorted(probe.socket_times)[-3:]
    # The `owl` command also starts an interpreter, which in the 5 s between
    # SIGTERM and SIGKILL (the tree is continued so it can act on the TERM)
    # competes for 2 cores with a fork bomb that ignores it: seen up to 1.05 s.
    assert probe.times and max(probe.times) < 2.5, (
        sorted(probe.times)[-3:],
        sorted(probe.socket_times)[-3:],
    )


def test_agent_that_exits_while_its_daemonized_child_holds_the_output(
    tmp_path: Path, project: Path
) -> None:
    cfg = {"agents": {"leaver": hostile("daemonize", "leave")}}
    with OwlDaemon(tmp_path / "home", cfg) as d, StatusProbe(d) as probe:
        job = d.add("go", project, "--agent", "leaver")
        d.machine("idle")
        t0 = time.monotonic()
        j = d.wait_job(job, "review", timeout=KILL_DELAY + 10)
        assert time.monotonic() - t0 < KILL_DELAY + 3
        assert j["runs"][0]["outcome"] == "succeeded"
        wait_for(lambda: live_pids(d) == [], timeout=3, what="the grandchild to be ended")
        log = Path(j["runs"][0]["log"]).read_text()
        assert "daemonized" in log and "still here" in log
    assert max(probe.socket_times) < 1.0 and max(probe.times) < 1.0, (
        sorted(probe.times)[-3:],
        sorted(probe.socket_times)[-3:],
    )


def test_silent_agent_is_ended_as_stalled(tmp_path: Path, project: Path) -> None:
    with OwlDaemon(tmp_path / "home", {"runs": {"stall": "2s"}}) as d, StatusProbe(d) as probe:
        job = d.add("trap-term sleep=600", project, "--attempts", "1")
        d.machine("idle")
        d.wait_run(job, "running")
        t0 = time.monotonic()
        j = d.wait_job(job, "exhausted", timeout=2 + KILL_DELAY + 10)
        assert time.monotonic() - t0 < 2 + 1 + KILL_DELAY + 2.5
        [r] = j["runs"]
        assert r["outcome"] == "failed" and r["ended_by"] == "sigkill", r
        assert "silent" in r["reason"] or "stall" in r["reason"] or "output" in r["reason"], r
        assert live_pids(d) == []
    assert max(probe.socket_times) < 1.0 and max(probe.times) < 1.0, (
        sorted(probe.times)[-3:],
        sorted(probe.socket_times)[-3:],
    )


def test_a_flood_of_output_keeps_the_log_capped(tmp_path: Path, project: Path) -> None:
    done = tmp_path / "flood-done"
    cfg = {
        "agents": {"flood": hostile("flood", "100", str(done))},
        "interruption": {"grace_window": "1s"},
    }
    with OwlDaemon(tmp_path / "home", cfg) as d, StatusProbe(d) as probe:
        job = d.add("go", project, "--agent", "flood")
        d.machine("idle")
        run = d.wait_run(job, "running")
        wait_for(done.exists, timeout=60, what="100 MB written")
        log = Path(run["log"])
        old = log.with_name(log.name + ".1")
        # the next watch (within a second) rotates what the flood left
        wait_for(
            lambda: old.exists() and log.stat().st_size <= LOG_CAP,
            timeout=5,
            what="the log rotated",
        )
        assert old.stat().st_size <= LOG_CAP
        assert stat.S_IMODE(old.stat().st_mode) == 0o600
        tail = old.read_bytes()[-2048:]
        assert tail.endswith(b"x\n")
        d.machine("input")
        d.wait_run(job, "frozen")
        j = d.wait_job(job, "pending", timeout=GRACE + KILL_DELAY + 10)
        assert j["runs"][0]["ended_by"] == "sigkill"
        assert live_pids(d) == []
        total = sum(p.stat().st_size for p in log.parent.glob(f"{log.name}*"))
        assert total <= 2 * LOG_CAP
    assert max(probe.socket_times) < 1.0 and max(probe.times) < 1.0, (
        sorted(probe.times)[-3:],
        sorted(probe.socket_times)[-3:],
    )


# ---------------------------------------------------------------- prompts

NASTY = [
    "line one\nline two\n\nline four",
    "$(touch PWNED) `touch PWNED` ; touch PWNED && touch PWNED | cat > PWNED",
    "--help",
    "-rf /",
    "'single' \"double\" \\back\\slash {prompt} {{braces}} %s %(x)s",
    "tab\there\rcarriage — ünïcødé ✓ 🦉",
    "*.py ~/ $HOME ${HOME} !! > < 2>&1",
]


def test_prompts_reach_the_agent_verbatim_and_never_a_shell(tmp_path: Path, project: Path) -> None:
    argv_log = tmp_path / "argv.jsonl"
    cfg = {
        "agents": {
            "echo": {
                "command": [
                    PY,
                    str(AGENTS / "hostile_argv.py"),
                    "{prompt}",
                    "--opt={prompt}",
                    "plain",
                ]
            }
        }
    }
    with OwlDaemon(tmp_path / "home", cfg, env={"ARGV_LOG": str(argv_log)}) as d:
        jobs = [d.add(p, project, "--agent", "echo") for p in NASTY]
        # `-` reads the prompt from stdin: a prompt that is only a dash-word
        p = d.owl("add", "--project", str(project), "--agent", "echo", "-", input="--version\n-x")
        assert p.returncode == 0, p.stderr
        jobs.append(int(p.stdout.strip()))
        d.machine("idle")
        for j in jobs:
            d.wait_job(j, "review", timeout=30)
    records = [json.loads(line) for line in argv_log.read_text().splitlines()]
    assert len(records) == len(jobs)
    for prompt, rec in zip([*NASTY, "--version\n-x"], records):
        argv = rec["argv"]
        assert len(argv) == 3 and argv[2] == "plain", argv  # never split, never joined
        assert prompt in argv[0], (prompt, argv[0][:200])
        assert argv[1] == "--opt=" + argv[0]
    # nothing ran a shell: no file appeared anywhere a shell would have put it
    for home in (project, tmp_path / "home" / "worktrees"):
        assert not list(Path(home).rglob("PWNED"))


def test_a_prompt_with_a_nul_is_refused(tmp_path: Path, project: Path) -> None:
    with OwlDaemon(tmp_path / "home") as d:
        p = d.owl("add", "--project", str(project), "-", input="before\0after")
        assert p.returncode == 1
        [line] = p.stderr.strip().splitlines()
        assert "NUL" in line
        assert d.status()["queue"] == []


# ------------------------------------------------------------------ paths


@pytest.mark.parametrize(
    "prefix", ["../../x/", "/etc/", "owl/../../", "-x", ".hidden/", "a b/", "owl/\n"]
)
def test_a_branch_prefix_that_could_wander_is_refused(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(configmod.ConfigError) as e:
        configmod.from_dict({"jobs": {"branch_prefix": prefix}}, "config.toml")
    assert "jobs.branch_prefix" in str(e.value) and "\n" not in str(e.value)
    # and the daemon will not start with it
    d = OwlDaemon(tmp_path / "home", {"jobs": {"branch_prefix": prefix}})
    p = subprocess.run(
        [PY, "-m", "owl", "daemon"], env=d.env, capture_output=True, text=True, timeout=20
    )
    assert p.returncode == 1 and "jobs.branch_prefix" in p.stderr


def test_project_paths_with_dots_and_links_cannot_steer_the_worktree(
    tmp_path: Path, project: Path
) -> None:
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "link").symlink_to(project)
    with OwlDaemon(tmp_path / "home") as d:
        ids = [
            d.add("exit=0", Path(str(tmp_path / "deep" / "er") + "/../../proj")),
            d.add("exit=0", tmp_path / "link"),
            d.add("exit=0", project / "."),
            d.add("exit=0", project / ".git" / ".."),
        ]
        worktrees = (tmp_path / "home" / "worktrees").resolve()
        for job_id in ids:
            j = d.job(job_id)
            assert j["project"] == str(project.resolve())
        d.machine("idle")
        for job_id in ids:
            j = d.wait_job(job_id, "review")
            assert Path(j["worktree"]).resolve().parent == worktrees
            assert j["branch"] == f"owl/job-{job_id}"
        # a subfolder of a repository is its repository
        (project / "sub").mkdir()
        assert d.job(d.add("exit=0", project / "sub"))["project"] == str(project.resolve())
        # a folder outside any repository is refused
        p = d.owl("add", "--project", str(tmp_path / "deep"), "x")
        assert p.returncode == 1 and "not a git repository" in p.stderr


def test_the_handoff_is_never_followed_through_a_symlink(tmp_path: Path, project: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-CONTENT\n")
    argv_log = tmp_path / "argv.jsonl"
    cfg = {"agents": {"echo": {"command": [PY, str(AGENTS / "hostile_argv.py"), "{prompt}"]}}}
    with OwlDaemon(tmp_path / "home", cfg, env={"ARGV_LOG": str(argv_log)}) as d:
        job = d.add(f"do it SYMLINK-HANDOFF={secret}", project, "--agent", "echo")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
    assert [r["outcome"] for r in j["runs"]] == ["failed", "succeeded"]
    first, second = [json.loads(x)["argv"][0] for x in argv_log.read_text().splitlines()]
    assert Path(j["worktree"], ".owl", "HANDOFF.md").is_symlink()
    assert "TOPSECRET" not in second
    assert "TOPSECRET" not in first
    assert secret.read_text() == "TOPSECRET-CONTENT\n"


# -------------------------------------------------------------- privacy


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_files_owl_writes_are_private(tmp_path: Path, project: Path) -> None:
    old = os.umask(0o022)  # a usual, permissive umask
    try:
        home = tmp_path / "home"
        with OwlDaemon(home) as d:
            job = d.add("tick=0.1 sleep=0.5 exit=0", project)
            d.machine("idle")
            j = d.wait_job(job, "review")
            files = [
                home / "owl.db",
                home / "owl.db-wal",
                home / "owl.db-shm",
                Path(j["runs"][0]["log"]),
                home / "owl.lock",
            ]
            sock = Path(d.status().get("socket") or home / "run" / "owl.sock")
            for f in files:
                assert f.exists(), f
                assert mode(f) == 0o600, (f, oct(mode(f)))
            assert sock.exists() and mode(sock) == 0o600, oct(mode(sock))
            for folder in (home, home / "logs", home / "run", home / "worktrees", sock.parent):
                assert mode(folder) == 0o700, (folder, oct(mode(folder)))
        cfg = tmp_path / "fresh" / "config.toml"
        configmod.set_value(cfg, "idle", "after", "5m")
        assert mode(cfg) == 0o600 and mode(cfg.parent) == 0o700
        configmod.set_value(cfg, "runs", "nice", 5)  # rewriting keeps it private
        assert mode(cfg) == 0o600
        assert configmod.load(cfg).nice == 5
    finally:
        os.umask(old)
