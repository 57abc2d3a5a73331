"""The supervisor with real processes: the real daemon, the real `owl`, real signals.

The machine is driven by hand (OWL_MACHINE=manual) so that each test says
exactly when the person comes and goes; tests/test_idle_daemon.py does the
same with real input under Xvfb.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from owlproc import OwlDaemon, freeze_a_run, process_states, wait_for


def all_stopped(pids: list[int]) -> bool:
    states = process_states(pids)
    return bool(pids) and all(s == psutil.STATUS_STOPPED for s in states.values())


def none_alive(d: OwlDaemon) -> bool:
    return d.alive_agent_pids() == []


def test_thaw_inside_the_window_continues_the_same_run_to_succeeded(home, project):
    with OwlDaemon(home, {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("setsid-child=2 sleep=1.5 write=out.txt commit=work exit=0", project)
        d.machine("idle")
        run = d.wait_run(job, "running")
        wait_for(lambda: len(d.agent_pids()) == 2, what="agent and its setsid child")
        d.machine("input")
        frozen = d.wait_run(job, "frozen")
        assert frozen["id"] == run["id"] and frozen["frozen_by"] == "machine"
        assert 0 < frozen["grace_left_s"] <= 30
        # every process, the one in a session of its own too, is stopped
        wait_for(lambda: all_stopped(d.agent_pids()), what="the whole tree stopped")
        time.sleep(2.0)  # longer than the agent's own work
        assert d.job(job)["state"] == "active"
        d.machine("idle")
        j = d.wait_job(job, "review")
        [r] = j["runs"]
        assert (r["id"], r["outcome"], r["ended_by"], r["exit_code"]) == (
            run["id"],
            "succeeded",
            "exit",
            0,
        )
        log = subprocess.run(
            ["git", "-C", str(project), "log", "--oneline", "owl/job-%d" % job],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "work" in log
        wait_for(lambda: none_alive(d), what="no agent process left")


@pytest.mark.parametrize("trap, ended_by", [(False, "sigterm"), (True, "sigkill")])
def test_grace_window_ends_the_run_and_the_job_waits_in_its_place(home, project, trap, ended_by):
    with OwlDaemon(home, {"interruption": {"grace_window": "1s"}}) as d:
        first = d.add(("trap-term " if trap else "") + "setsid-child=60 sleep=60", project)
        second = d.add("sleep=60", project)
        third = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(first, "running")
        wait_for(lambda: len(d.agent_pids()) == 2, what="agent and child")
        pids = d.agent_pids()
        d.machine("input")
        d.wait_run(first, "frozen")
        t0 = time.monotonic()
        j = d.wait_job(first, "pending", timeout=15)
        elapsed = time.monotonic() - t0
        [r] = j["runs"]
        assert r["outcome"] == "interrupted"
        assert r["ended_by"] == ended_by
        assert "grace window" in r["reason"]
        assert elapsed < 1 + 5 + 2 if trap else elapsed < 1 + 2
        assert j["position"] == 1 and j["attempts_left"] == 3
        assert [d.job(x)["position"] for x in (second, third)] == [2, 3]
        assert process_states(pids) == {p: "gone" for p in pids} or none_alive(d)
        assert none_alive(d)
        # the worktree and branch are kept for the next Run
        assert Path(j["worktree"]).is_dir()


def test_a_child_holding_the_agents_output_does_not_hang_the_run(home, project):
    with OwlDaemon(home) as d:
        # the agent exits at once; its setsid child keeps stdout open for a minute
        job = d.add("setsid-child=60 exit=0", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=15)
        assert j["runs"][0]["outcome"] == "succeeded"
        wait_for(lambda: none_alive(d), what="the leftover child to be ended")


def test_failed_runs_spend_attempts_until_exhausted(home, project):
    with OwlDaemon(home) as d:
        job = d.add("exit=7", project, "--attempts", "2")
        d.machine("idle")
        j = d.wait_job(job, "exhausted", timeout=20)
        assert [(r["outcome"], r["exit_code"]) for r in j["runs"]] == [("failed", 7), ("failed", 7)]
        assert j["attempts_left"] == 0
        assert "code 7" in j["reason"]


def test_interrupted_runs_cost_no_attempt(home, project):
    with OwlDaemon(home, {"interruption": {"grace_window": "1s"}}) as d:
        job = d.add("sleep=60", project, "--attempts", "1")
        for _ in range(2):
            d.machine("idle")
            d.wait_run(job, "running")
            d.machine("input")
            d.wait_job(job, "pending")
        j = d.job(job)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "interrupted"]
        assert j["attempts_left"] == 1 and j["state"] == "pending"


def test_daemon_killed_mid_run_then_restarted_leaves_nothing_and_the_job_pending(home, project):
    d = OwlDaemon(home)
    with d:
        job = d.add("trap-term setsid-child=120 sleep=120", project)
        other = d.add("sleep=1", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(lambda: len(d.agent_pids()) == 2, what="agent and child")
        wait_for(lambda: len(d.run_of(job)["pids"]) == 2, what="pids recorded")
        pids = d.agent_pids()
        d.kill()
        assert all(s != "gone" for s in process_states(pids).values())
        d.start()
        assert process_states(pids) == {p: "gone" for p in pids} or none_alive(d)
        assert none_alive(d)
        j = d.job(job)
        assert j["state"] == "pending" and j["position"] == 1
        [r] = j["runs"]
        assert r["outcome"] == "interrupted"
        assert r["reason"] == "the daemon stopped before this Run ended"
        assert d.job(other)["position"] == 2


def test_daemon_stop_ends_live_runs_frozen_ones_first_within_6s(home, project):
    d = OwlDaemon(home)
    with d:
        job, _ = freeze_a_run(d, project, "trap-term setsid-child=120 sleep=120")
        t0 = time.monotonic()
        assert d.stop(timeout=10) == 0
        assert time.monotonic() - t0 < 6.5
        assert none_alive(d)
        # read from the database with no daemon: answered, then exit 3 (no daemon)
        p = d.owl("jobs", "show", str(job), "--json")
        assert p.returncode == 3 and "no Owl daemon" in p.stderr, (p.returncode, p.stderr)
        j = json.loads(p.stdout)
        assert j["state"] == "pending"
        assert j["runs"][0]["outcome"] == "interrupted"
        assert j["runs"][0]["reason"] == "the daemon stopped"
        assert j["runs"][0]["ended_by"] == "sigkill"


def test_pause_holds_across_a_restart_and_resume_lets_work_go_on(home, project):
    d = OwlDaemon(home, {"interruption": {"grace_window": "30s"}})
    with d:
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        out = d.ok("pause")
        assert "1 Run frozen" in out
        r = d.wait_run(job, "frozen")
        assert r["frozen_by"] == "user"
        d.machine("input")
        d.machine("idle")  # the machine never thaws what the person paused
        time.sleep(0.3)
        assert d.run_of(job)["state"] == "frozen"
        assert "already paused" in d.ok("pause")  # the goal holds: exit 0
        d.stop()
        d.start()
        st = d.status()
        assert st["paused"] is True and st["runs"] == []
        d.machine("idle")
        time.sleep(0.5)
        assert d.status()["runs"] == []  # held: nothing starts
        assert d.status()["waiting"] == "paused"
        assert d.ok("resume").strip() == "resumed"
        d.wait_run(job, "running")
        assert "already running" in d.ok("resume")


def test_start_runs_one_job_now_and_input_does_not_freeze_it(home, project):
    with OwlDaemon(home) as d:
        job = d.add("sleep=60", project)
        d.add("sleep=60", project)
        d.machine("input")
        d.ok("start")
        d.wait_run(job, "running")
        d.machine("input")
        time.sleep(0.3)
        assert d.run_of(job)["state"] == "running"
        p = d.owl("start")
        assert p.returncode == 1 and "cap" in p.stderr
        d.ok("stop", "--force")
        j = d.wait_job(job, "pending")
        assert j["runs"][0]["reason"] == "stopped by the user"


def test_stop_freezes_and_ends_after_the_grace_window(home, project):
    with OwlDaemon(home, {"interruption": {"grace_window": "1s"}}) as d:
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        d.ok("stop", "--after-grace")
        assert d.wait_run(job, "frozen")["frozen_by"] == "user"
        d.machine("input")  # so that the Job, once back in the queue, stays there
        j = d.wait_job(job, "pending")
        assert j["runs"][0]["reason"] == "stopped by the user"
        assert j["runs"][0]["ended_by"] == "sigterm"


def test_timeout_and_stall_end_runs_failed(home, project):
    with OwlDaemon(home, {"runs": {"timeout": "1s"}}) as d:
        job = d.add("tick=0.1 sleep=60", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "exhausted")
        assert "runs.timeout" in j["runs"][0]["reason"]
    with OwlDaemon(home.parent / "home2", {"runs": {"stall": "1s"}}) as d:
        # the same project under a second Owl home: its branch must be a new one
        job = d.add("sleep=60", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "exhausted")
        assert "runs.stall" in j["runs"][0]["reason"]
        assert j["branch"] == f"owl/job-{job}-2"


def test_agent_environment_and_worktree(home, project, tmp_path):
    with OwlDaemon(home) as d:
        pidfile = tmp_path / "pid"
        job = d.add(f"pidfile={pidfile} sleep=30", project)
        d.machine("idle")
        run = d.wait_run(job, "running")
        pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="pidfile"))
        p = psutil.Process(pid)
        env = p.environ()
        assert env["OWL_JOB_ID"] == str(job) and env["OWL_RUN_ID"] == str(run["id"])
        assert p.cwd() == str(home / "worktrees" / f"job-{job}")
        assert os.getsid(pid) == pid  # a session of its own
        assert p.nice() == 10
        branch = subprocess.run(
            ["git", "-C", p.cwd(), "branch", "--show-current"], capture_output=True, text=True
        ).stdout.strip()
        assert branch == f"owl/job-{job}"
        d.ok("stop", "--force")


def test_a_second_daemon_on_the_same_home_refuses_and_names_the_first(home):
    with OwlDaemon(home) as d:
        second = subprocess.run(
            [*__import__("owlproc").OWL, "daemon"],
            env=d.env,
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert second.returncode == 1
        assert f"pid {d.proc.pid}" in second.stderr


@pytest.mark.parametrize(
    "config, words",
    [
        ('[idle]\nafter = "soon"\n', ["idle.after", "soon"]),
        ("[runs]\nmax_parallel = 0\n", ["runs.max_parallel", "0"]),
        ('[idle]\nafterr = "1m"\n', ["idle.afterr"]),
        ("[idle\n", ["not valid TOML"]),
        ("[interruption]\ngrace_window = 5\n", ["interruption.grace_window", "5"]),
    ],
)
def test_a_bad_config_stops_the_daemon_with_file_key_and_value(home, config, words):
    d = OwlDaemon(home)
    (home / "config.toml").write_text(config)
    p = subprocess.run(
        [*__import__("owlproc").OWL, "daemon"],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert p.returncode == 1
    line = p.stderr.strip()
    assert "\n" not in line and str(home / "config.toml") in line
    for w in words:
        assert w in line


def test_refusals(home, project, tmp_path):
    with OwlDaemon(home) as d:
        notgit = tmp_path / "plain"
        notgit.mkdir()
        cases = [
            (["add", "--project", str(notgit), "x"], "not a git repository"),
            (["add", "--project", str(tmp_path / "nope"), "x"], "does not exist"),
            (["add", "--project", str(project), "  "], "prompt is empty"),
            (["add", "--project", str(project), "--agent", "ghost", "x"], "unknown agent"),
            (["jobs", "show", "999"], "no job 999"),
            (["jobs", "drop", "999"], "no job 999"),
            (["start"], "no Job is waiting"),
        ]
        for args, words in cases:
            p = d.owl(*args)
            assert p.returncode == 1, (args, p.stdout, p.stderr)
            assert words in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)
        p = d.owl("add", "--project", str(project), "-", input="x" * 1_000_000)
        assert p.returncode == 1 and "limit" in p.stderr
        assert d.json("jobs", "list") == []
