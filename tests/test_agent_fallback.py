"""A second agent carries a Job on while the first waits on a usage limit, through
the real daemon; and `owl agents` / `owl status` say who waits and who is ready.

The first agent is a command agent whose output is a usage limit (the words
Codex prints), so the switch is seen in seconds; the real CLIs' limits are in
test_codex_gemini.py.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from owlproc import AGENT, OwlDaemon, make_project

LIMITED = ["sh", "-c", 'echo "You\'ve hit your usage limit. Try again in 2 hours."; exit 1']


def daemon(tmp_path: Path, **jobs: object) -> OwlDaemon:
    cfg: dict = {
        "agents": {
            "tired": {"command": LIMITED, "limit_pattern": "usage limit"},
            "script": {"command": [sys.executable, AGENT, "{prompt}"]},
        },
        "agent": {"default": "tired"},
    }
    if jobs:
        cfg["jobs"] = jobs
    return OwlDaemon(tmp_path / "owl", cfg, agent=False)


def test_the_next_agent_carries_the_job_on_fresh_and_spends_no_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        job = d.add(
            "write=x.txt commit=add-x", project, "--agent", "tired,script", "--attempts", "1"
        )
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        assert [(r["agent"], r["outcome"]) for r in j["runs"]] == [
            ("tired", "interrupted"),
            ("script", "succeeded"),
        ]
        assert j["runs"][0]["reason"].startswith("tired's usage limit; resets ")
        assert j["runs"][1]["resumed"] is None and j["attempts_left"] == 1
        shown = d.ok("jobs", "show", str(job))
        assert [
            ln.split(" · ")[0].strip() for ln in shown.splitlines() if ln.strip().startswith("by ")
        ] == ["by tired", "by script"]
        # the waiting agent and the ready one, at a glance
        status = d.ok("status")
        assert "tired waits until" in status and "script ready" in status
        listing = {a["name"]: a for a in d.json("agents", "--json")["agents"]}
        assert listing["tired"]["waits"] and listing["tired"]["runs_today"] == 1
        assert 7000 < listing["tired"]["until_epoch"] - time.time() <= 7200
        assert not listing["script"]["waits"] and listing["script"]["runs_today"] == 1
        assert listing["script"]["found"] and listing["codex"]["built_in"]
        text = d.ok("agents")
        assert "tired (default): found " in text and "waits until" in text
        # a Job naming only the waiting agent waits for it
        held = d.add("write=y.txt", project, "--attempts", "1")
        assert "waits for tired's usage limit" in (d.status()["waiting"] or "")
        assert d.job(held)["state"] == "pending" and d.job(held)["runs"] == []


def test_the_config_fallback_serves_every_job(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, fallback=["script"]) as d:
        job = d.add("write=x.txt commit=add-x", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        assert [r["agent"] for r in j["runs"]] == ["tired", "script"]


def test_an_agent_list_is_checked_when_the_job_is_added(tmp_path):
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path) as d:
        for bad, words in (
            ("tired,,script", "name each agent once"),
            ("tired,tired", "name each agent once"),
            ("tired,nosuch", "unknown agent 'nosuch'"),
        ):
            p = d.owl("add", "x", "--project", str(project), "--agent", bad)
            assert p.returncode != 0 and words in p.stderr, p.stderr
        assert d.json("jobs", "--json") == [] or d.json("jobs", "--json").get("jobs") == []


def test_the_tray_says_which_agent_does_each_run_and_every_wait() -> None:
    from owl.tray.menu import recent_item
    from owl.tray.wording import limit_line, run_label

    live = {
        "job_id": 3,
        "title": "Add a flag",
        "state": "running",
        "running_for_s": 65,
        "agent": "codex",
    }
    assert run_label(live).endswith("— codex running · 1m")
    assert recent_item(
        {"job_id": 3, "title": "t", "outcome": "interrupted", "agent": "claude"}
    ).label.endswith("— interrupted (claude)")
    waits = [
        {"agent": "claude", "until": "2026-12-01T08:10:00", "kind": "five_hour"},
        {"agent": "codex", "until": "2026-12-01T09:00:00", "kind": "usage"},
    ]
    assert limit_line({"limits": waits}) == "Waiting: claude until 08:10 · codex until 09:00"


def test_a_job_goes_back_to_its_first_agents_own_conversation(tmp_path):
    from owl.agents import CodexDriver
    from owl.engine.carryon import plan_for
    from owl.store.db import Store

    store = Store(tmp_path / "owl.db")
    job = store.add_job("Add a flag", str(tmp_path), "codex,gemini", 3)
    first = store.start_run(job)
    store.set_run(first, agent="codex", session_id="01a2335e-c68f-77d3-aa55-821659948ae6")
    store.finish_run(first, "interrupted", "exit", "codex's usage limit; resets at 09:00", 1)
    second = store.start_run(job)
    store.set_run(second, agent="gemini", session_id="93258da5-cfb8-4639-94a9-afaee13e34cb")
    store.finish_run(second, "failed", "exit", "its checks failed", 1)
    plan, _ = plan_for(store, store.job(job), CodexDriver({}), tmp_path)
    assert plan.resume == "01a2335e-c68f-77d3-aa55-821659948ae6"
    assert plan.message and plan.message.startswith("While you waited, gemini carried the task on")
