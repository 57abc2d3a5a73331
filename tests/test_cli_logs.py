"""`owl logs JOB`: the latest Run by default, another with --run, a check's
output with --check, under a header that says whose log it is; and `owl jobs
show` gives each Run's log command, durations and relative times."""

from __future__ import annotations

import re

from owlproc import OwlDaemon, make_project

CHECKS = "[[checks]]\nname = 'unit tests'\nrun = 'echo checking the units; exit 1'\n"


def test_logs_of_a_job_its_runs_and_its_checks(tmp_path):
    project = make_project(tmp_path / "proj", {".owl.toml": CHECKS, "README": "x\n"})
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("tick=0.1 sleep=60", project, "--attempts", "2")
        d.machine("idle")
        first = d.wait_run(job, "running")
        d.ok("stop")  # interrupted: costs no attempt
        d.wait_job(job, "pending")
        d.owl("jobs", "drop", str(job), "--force")
        job = d.add("tick=0.1 sleep=0.5 exit=0", project, "--attempts", "1")
        d.machine("input")
        d.machine("idle")
        shown = d.wait_job(job, "blocked", timeout=30)
        [run] = shown["runs"]
        assert run["outcome"] == "failed" and run["attempt"] == 1

        text = d.ok("logs", str(job))
        head, *body = text.splitlines()
        assert head.startswith(
            f"job {job} · run {run['id']} · attempt 1 · failed: check unit tests failed (exit 1)"
        ), head
        assert any("tick" in line for line in body)
        assert d.ok("logs", "--run", str(run["id"])) == text
        assert d.ok("logs", str(job), "--run", str(run["id"])) == text

        check = d.ok("logs", str(job), "--check", "unit tests")
        assert check.splitlines()[0] == (
            f"job {job} · run {run['id']} · check unit tests · failed (exit 1)"
        )
        assert "checking the units" in check

        p = d.owl("logs", str(job), "--run", str(first["id"]))
        assert p.returncode == 1 and f"run {first['id']} is not job {job}'s" in p.stderr
        p = d.owl("logs", str(job), "--check", "lint")
        assert p.returncode == 1 and "no check 'lint'" in p.stderr and "'unit tests'" in p.stderr
        p = d.owl("logs", "999")
        assert p.returncode == 1 and "no job 999" in p.stderr

        show = d.ok("jobs", "show", str(job))
        assert f"log: owl logs {job}" in show
        assert f"log: owl logs {job} --run {run['id']} --check 'unit tests'" in show
        assert re.search(r"started \d\d:\d\d \((just now|\d+s ago)\), took \d+s", show), show
        assert re.search(r"queued:   \d\d:\d\d \(", show), show
        assert "0 of 1 left" in show


def test_an_interrupted_run_spends_no_attempt_in_any_label(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("tick=0.1 sleep=60", project, "--attempts", "3")
        d.machine("idle")
        d.wait_run(job, "running")
        d.ok("stop")
        j = d.wait_job(job, "pending")
        assert j["runs"][0]["attempt"] is None and j["attempts_left"] == 3
        d.ok("start")
        live = d.wait_run(job, "running")
        j = d.job(job)
        assert j["runs"][-1]["attempt"] == 1
        head = d.ok("logs", str(job)).splitlines()[0]
        assert head == f"job {job} · run {live['id']} · attempt 1 · running"
        show = d.ok("jobs", "show", str(job))
        assert f"run {j['runs'][0]['id']} · no attempt · interrupted" in show
        assert "3 of 3 left" in show
        d.ok("stop")
