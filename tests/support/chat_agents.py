"""What the tests of agent CLIs run against the Chat Completions stub share:
the daemon that contains them, the commit they are scripted to make, a Job
taken to review and on by a reply, and a rate limit waited out.

Each agent's own file keeps only what is its own (its provider's settings,
its usage and log words): the rest is one behaviour, asserted one way.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from owlproc import OwlDaemon, wait_for
from support.chat_stub import ChatStub

COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)
HELLO = "-v: add a hello file and commit it."  # starts with "-": it must reach the model whole
GOODBYE = "Please also add a goodbye file."


def contained_daemon(tmp_path: Path, agent: str, cfg: dict[str, Any], env: dict) -> OwlDaemon:
    """A daemon with `agent` configured as `cfg` and every Run contained."""
    full = {"agents": {agent: cfg}, "sandbox": {"mode": "required"}}
    return OwlDaemon(tmp_path / "owl", full, env=env)


def to_review(d: OwlDaemon, project: Path, agent: str) -> tuple[int, dict, str]:
    """Add the hello Job for `agent` and take it to review: the Job, its one
    Run (succeeded, contained, its bash call and the commit in its log and
    history) and that Run's log."""
    job = d.add(HELLO, project, "--agent", agent)
    d.machine("idle")
    j = d.wait_job(job, "review", timeout=300)
    [run] = j["runs"]
    assert run["outcome"] == "succeeded", run
    assert run["last_message"] == "Committed hello.txt."
    assert run["contained"].startswith("contained: bwrap")
    log = d.ok("logs", str(job), "--run", str(run["id"]))
    assert "→ bash: echo hello > hello.txt" in log and "← committed" in log
    assert "Add hello" in d.ok("jobs", "show", str(job))
    return job, run, log


def reply_goes_on(d: OwlDaemon, job: int, stub: ChatStub) -> tuple[dict, dict]:
    """Reply to the Job in review: its second Run resumes the first's session,
    which carries the earlier turns to the model; the Job spends no attempt.
    Returns the Job and its second Run."""
    d.ok("jobs", "reply", str(job), GOODBYE)
    j = d.wait_job(job, "review", timeout=300)
    first, second = j["runs"]
    assert second["resumed"] is True and second["session_id"] == first["session_id"]
    assert second["last_message"] == "Added the goodbye too."
    later = stub.turns()[-1].text()
    assert later.index("add a hello file") < later.index(GOODBYE)
    assert j["attempts_left"] == j["attempts"]
    return j, second


def waits_out_a_rate_limit(d: OwlDaemon, project: Path, agent: str, timeout: float) -> dict:
    """A Job whose every request meets HTTP 429 ("Please try again in
    7m12s."): its first Run ends interrupted, no attempt spent, and the agent
    waits until the reset the provider named. Returns the Job."""
    job = d.add("Say done.", project, "--agent", agent, "--attempts", "1")
    d.machine("idle")
    began = time.time()
    j = wait_for(
        lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
        timeout,
        what="the first Run to end",
    )
    first = j["runs"][0]
    assert first["outcome"] == "interrupted", first
    assert first["reason"].startswith(f"{agent}'s API rate limit (HTTP 429); resets at ")
    assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
    [w] = d.status()["limits"]
    assert w["agent"] == agent
    assert 432 - 5 <= w["until_epoch"] - began <= 432 + (time.time() - began)
    return d.job(job)
