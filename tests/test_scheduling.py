"""Scheduling with the real daemon: caps, Shifts, attempts and the queue."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from owl.rules.scheduler import QueuedJob, pick
from owl.rules.shifts import Shift, begin
from owlproc import OwlDaemon, make_project, wait_for


# ----------------------------------------------------------- pure pieces


def caps(table: dict[str, int]):
    return lambda project: table.get(project)


@pytest.mark.parametrize(
    "pending, live, max_parallel, project_caps, job, waiting",
    [
        ([], [], 1, {}, None, None),
        ([("a", 1)], [], 1, {}, 1, None),
        ([("a", 1)], ["b"], 1, {}, None, "at the cap of 1 running Run (runs.max_parallel)"),
        ([("a", 1), ("b", 2)], ["a"], 2, {"a": 1}, 2, "project a is at its cap of 1"),
        ([("a", 1), ("a", 2)], ["a"], 3, {"a": 1}, None, "project a is at its cap of 1"),
        (
            [("a", 1), ("b", 2), ("c", 3)],
            ["a", "b"],
            2,
            {},
            None,
            "at the cap of 2 running Runs (runs.max_parallel)",
        ),
        ([("a", 1), ("b", 2)], [], 2, {"a": 2}, 1, None),
        # a project whose settings are not known yet: said so, never "a cap of 0"
        (
            [("a", 1), ("b", 2)],
            ["a"],
            2,
            {"a": 0},
            2,
            "project a's settings (.owl.toml) are being read",
        ),
    ],
)
def test_pick(pending, live, max_parallel, project_caps, job, waiting):
    d = pick(
        [QueuedJob(i, p) for p, i in pending],
        live,
        max_parallel=max_parallel,
        project_cap=caps(project_caps),
    )
    assert (d.job.id if d.job else None, d.waiting) == (job, waiting)


def test_shift_rules():
    s = begin(None, 100.0, 60.0)
    assert (s.started_at, s.ends_at) == (100.0, 160.0)
    assert begin(s, 110.0, 10.0).ends_at == 160.0  # extends to the later end
    assert begin(s, 110.0, 100.0).ends_at == 210.0
    assert begin(s, 110.0, 10.0, replace=True).ends_at == 120.0
    assert s.over(159.0, queue_empty=True) is None
    assert s.over(160.0, queue_empty=False) == "its time is up"
    e = begin(None, 0.0, 60.0, until_empty=True)
    assert e.over(1.0, queue_empty=True) == "the queue is empty"
    assert Shift.from_dict(s.to_dict()) == s
    assert Shift.from_dict({"nonsense": 1}) is None
    with pytest.raises(ValueError):
        begin(None, 0.0, 0.0)


# ------------------------------------------------------- the real daemon


@pytest.fixture
def projects(tmp_path: Path) -> list[Path]:
    return [make_project(tmp_path / f"p{i}") for i in range(3)]


def live_jobs(d: OwlDaemon) -> set[int]:
    return {r["job_id"] for r in d.status()["runs"]}


def test_a_global_cap_of_two_across_three_projects(tmp_path, projects):
    with OwlDaemon(tmp_path / "home", {"runs": {"max_parallel": 2}}) as d:
        jobs = [d.add("sleep=60", p) for p in projects]
        d.machine("idle")
        wait_for(lambda: live_jobs(d) == set(jobs[:2]), what="two Runs")
        time.sleep(0.5)
        st = d.status()
        assert live_jobs(d) == set(jobs[:2])
        assert st["waiting"] == "at the cap of 2 running Runs (runs.max_parallel)"
        assert "at the cap of 2" in d.ok("status")
        d.ok("stop", "--force")


def test_a_project_cap_lets_the_next_projects_job_start_first_keeping_places(tmp_path, projects):
    api, web = projects[0], projects[1]
    cfg = {"runs": {"max_parallel": 3}, "projects": {str(api): {"max_parallel": 1}}}
    with OwlDaemon(tmp_path / "home", cfg) as d:
        a1 = d.add("sleep=60", api)
        a2 = d.add("sleep=60", api)
        w1 = d.add("sleep=60", web)
        d.machine("idle")
        wait_for(lambda: live_jobs(d) == {a1, w1}, what="api's first and web's job")
        st = d.status()
        assert st["waiting"] == f"project {api} is at its cap of 1"
        assert [(q["id"], q["position"]) for q in st["queue"]] == [(a1, 1), (a2, 2), (w1, 3)]
        d.ok("stop", "--force")


def test_a_project_cap_from_owl_toml_on_the_base_branch(tmp_path):
    api = make_project(tmp_path / "api", {".owl.toml": "max_parallel = 1\n"})
    with OwlDaemon(tmp_path / "home", {"runs": {"max_parallel": 2}}) as d:
        a1 = d.add("sleep=60", api)
        d.add("sleep=60", api)
        d.machine("idle")
        wait_for(lambda: live_jobs(d) == {a1}, what="one Run")
        time.sleep(0.5)
        assert live_jobs(d) == {a1}
        assert "at its cap of 1" in d.status()["waiting"]
        d.ok("stop", "--force")


def test_owl_start_starts_a_second_job_of_a_project_with_a_live_run(tmp_path, projects):
    # The machine is in use: nothing starts by itself, and nothing has read the
    # project's settings since its first Job started; `owl start` reads them.
    with OwlDaemon(tmp_path / "home", {"runs": {"max_parallel": 2}}) as d:
        first = d.add("sleep=60", projects[0])
        second = d.add("sleep=60", projects[0])
        d.ok("start")
        wait_for(lambda: live_jobs(d) == {first}, what="the first Run")
        p = d.owl("start")
        assert p.returncode == 0, p.stderr
        assert "cap of 0" not in p.stdout + p.stderr
        wait_for(lambda: live_jobs(d) == {first, second}, what="the second Run")
        d.ok("stop", "--force")


@pytest.mark.parametrize("value", ["0", "-1", "1.5", '"two"'])
def test_bad_caps_are_refused_with_the_key_named(tmp_path, value):
    d = OwlDaemon(tmp_path / "home")
    (d.home / "config.toml").write_text(f"[runs]\nmax_parallel = {value}\n")
    p = d.owl("config", "check")
    assert p.returncode == 1 and "runs.max_parallel" in p.stderr


def test_a_shift_started_while_input_keeps_coming_starts_runs_and_freezes_none(tmp_path, projects):
    with OwlDaemon(tmp_path / "home", {"runs": {"max_parallel": 2}}) as d:
        jobs = [d.add("sleep=60", p) for p in projects[:2]]
        d.machine("input")
        time.sleep(0.3)
        assert live_jobs(d) == set()
        out = d.ok("shift", "start", "--for", "1h")
        assert "Shift started" in out
        wait_for(lambda: live_jobs(d) == set(jobs), what="both Runs")
        for _ in range(5):
            d.machine("input")
            time.sleep(0.1)
        assert all(r["state"] == "running" for r in d.status()["runs"])
        sh = d.json("shift", "status")
        assert sh["on"] and 3500 < sh["left_s"] <= 3600
        d.ok("stop", "--force")


def test_a_run_started_by_idle_at_night_is_not_frozen_once_a_shift_starts(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("sleep=60", projects[0])
        d.machine("idle")
        d.wait_run(job, "running")
        d.ok("shift", "start", "--for", "10m")
        d.machine("input")
        time.sleep(0.5)
        assert d.run_of(job)["state"] == "running"
        # the Shift ends while the person is here: the machine is theirs again at once
        said = d.ok("shift", "stop")
        assert "Shift ended; 1 Run frozen, as you are here" in said, said
        run = d.wait_run(job, "frozen")
        assert run["frozen_by"] == "machine"
        d.machine("idle")  # they leave within the grace window: it carries on
        d.wait_run(job, "running")
        d.ok("shift", "start", "--for", "10m")
        said = d.ok("shift", "stop")  # nobody here now
        assert "Shift ended; 1 Run carrying on while nobody is here" in said, said
        assert d.run_of(job)["state"] == "running"


def test_pause_during_a_shift_freezes_and_holds_and_resume_releases(tmp_path, projects):
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("sleep=60", projects[0])
        d.machine("input")
        d.ok("shift", "start")
        d.wait_run(job, "running")
        d.ok("pause")
        assert d.wait_run(job, "frozen")["frozen_by"] == "user"
        assert d.json("shift", "status")["held"] is True
        d.ok("resume")
        d.wait_run(job, "running")
        d.ok("stop", "--force")


def test_a_two_second_shift_until_empty(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("sleep=0.5 exit=0", projects[0])
        d.machine("input")
        d.ok("shift", "start", "--for", "2s", "--until-empty")
        d.wait_job(job, "review")
        wait_for(lambda: d.json("shift", "status") is None, timeout=5, what="the Shift to end")
        later = d.add("sleep=0.5 exit=0", projects[0])
        time.sleep(1.0)
        assert d.job(later)["state"] == "pending"  # the machine is in use: no Shift


def test_a_shift_ends_on_time(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        d.machine("input")
        d.ok("shift", "start", "--for", "1s")
        wait_for(lambda: d.json("shift", "status") is None, timeout=5, what="the Shift to end")
        assert "no Shift is on" in d.ok("shift", "stop")  # the goal holds: exit 0


def test_a_shift_survives_a_restart_and_one_that_ended_meanwhile_is_over(tmp_path, projects):
    d = OwlDaemon(tmp_path / "home")
    with d:
        d.ok("shift", "start", "--for", "1h")
        d.ok("pause")
        d.stop()
        d.start()
        sh = d.json("shift", "status")
        assert sh["on"] and sh["held"] and sh["left_s"] > 3500
        d.ok("shift", "start", "--for", "2s", "--replace")
        d.stop()
        time.sleep(2.5)
        d.start()
        assert d.json("shift", "status") is None


def test_attempts_across_interruptions_and_failures_and_extend_restores_the_place(
    tmp_path, projects
):
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "1s"}}) as d:
        flaky = d.add("sleep=1.5 exit=3", projects[0], "--attempts", "2")
        behind = d.add("sleep=60", projects[0])
        # an interruption costs nothing
        d.machine("idle")
        d.wait_run(flaky, "running")
        d.machine("input")
        j = d.wait_job(flaky, "pending")
        assert j["attempts_left"] == 2
        # two failures exhaust it; the Job behind moves up
        d.machine("idle")
        j = d.wait_job(flaky, "exhausted", timeout=20)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "failed", "failed"]
        d.wait_run(behind, "running")
        d.machine("input")
        d.ok("stop", "--force")
        d.wait_job(behind, "pending")
        assert d.job(behind)["position"] == 1
        # extend: back at the place it kept, ahead of the Job queued after it
        j = d.json("jobs", "extend", str(flaky), "--attempts", "1")
        assert (j["state"], j["position"], j["attempts_left"]) == ("pending", 1, 1)
        assert d.job(behind)["position"] == 2


def test_move_reorders_pending_jobs(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        a, b, c = (d.add("sleep=1", projects[0]) for _ in range(3))
        d.ok("jobs", "move", str(c), "1")
        assert [d.job(x)["position"] for x in (a, b, c)] == [2, 3, 1]
        p = d.owl("jobs", "move", str(a), "4")
        assert p.returncode == 1 and "outside the queue" in p.stderr


def test_a_job_blocked_by_a_failed_setup_says_why(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("sleep=1", projects[0])
        # the project's settings break after the Job was queued
        (projects[0] / ".owl.toml").write_text("max_parallel = 1\ncolour = 'blue'\n")
        subprocess.run(
            ["git", "-C", str(projects[0]), "commit", "-qam", "x", "--allow-empty"], check=True
        )
        subprocess.run(["git", "-C", str(projects[0]), "add", ".owl.toml"], check=True)
        subprocess.run(["git", "-C", str(projects[0]), "commit", "-qm", "settings"], check=True)
        time.sleep(11)  # the daemon caches project settings for 10 s
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=5)
        assert ".owl.toml" in j["reason"] and "colour" in j["reason"]
        assert j["runs"] == []  # no agent started
        assert "colour" in d.ok("jobs", "list")
        # and it can be given another go once fixed
        assert d.owl("jobs", "extend", str(job)).returncode == 0


def test_stop_during_a_shift_ends_this_work_not_the_shift(tmp_path, projects):
    with OwlDaemon(tmp_path / "home") as d:
        first = d.add("sleep=60", projects[0])
        second = d.add("sleep=60", projects[1])
        d.machine("input")
        d.ok("shift", "start", "--for", "1h")
        d.wait_run(first, "running")
        d.ok("stop", "--force")
        # the Shift goes on with the next Job; the stopped one sits out this spell
        d.wait_run(second, "running")
        j = d.job(first)
        assert j["state"] == "pending" and j["position"] == 1
        assert d.json("shift", "status")["on"]
        d.ok("stop", "--force")
        wait_for(lambda: d.status()["runs"] == [], what="no Run")
        time.sleep(0.5)
        assert d.status()["runs"] == []
        assert "was stopped" in d.status()["waiting"]
        # a new idle spell lets them run again
        d.machine("idle")
        d.wait_run(first, "running")
        d.ok("stop", "--force")
