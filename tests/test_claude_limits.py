"""Usage limits, service failures, resumed conversations and replies, with the REAL CLI.

The real daemon runs the real Claude Code CLI against the Messages API stub,
which answers as the service does when an account meets a limit: a 429 with
the unified rate-limit headers for a subscription (CLAUDE_CODE_OAUTH_TOKEN),
a plain 429 for an API key, a 529 when overloaded. The CLI's own retries are
cut to one (CLAUDE_CODE_MAX_RETRIES) so each of these ends in seconds.

Without the CLI these tests fail (tools/install-claude.sh installs it).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.anthropic_stub import (
    AnthropicStub,
    ApiError,
    Bash,
    Overloaded,
    RateLimited,
    Text,
    UsageLimit,
)
from support.claude import require_claude
from support.kept import kept_state, the_kept_state

from owlproc import AGENT, OwlDaemon, make_project, wait_for
from owl.rules import jobrules, timefmt

pytestmark = pytest.mark.claude

COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)


def claude_daemon(
    tmp_path: Path,
    stub: AnthropicStub,
    config: dict | None = None,
    *,
    oauth: bool = False,
    resume: bool = True,
) -> OwlDaemon:
    claude = require_claude()
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    cfg = {
        "agents": {
            "claude": {"path": claude, "resume": resume},
            "script": {"command": [sys.executable, AGENT, "{prompt}"]},
        },
        "agent": {"default": "claude"},
        # Contained, as a person's Runs are: limits, resumes and handoffs hold inside.
        "sandbox": {"mode": "required"},
    }
    for k, v in (config or {}).items():
        cfg.setdefault(k, {}).update(v)
    d = OwlDaemon(
        tmp_path / "owl",
        cfg,
        agent=False,
        env={
            **stub.env(home, oauth=oauth),
            "CLAUDE_CODE_MAX_RETRIES": "1",
            # Owl started from inside a Claude Code session: not passed on
            "CLAUDECODE": "1",
            "CLAUDE_CODE_ENTRYPOINT": "cli",
        },
    )
    if oauth:
        d.env.pop("ANTHROPIC_API_KEY", None)
    return d


def first_ended(d: OwlDaemon, job: int, timeout: float = 30.0) -> dict:
    return wait_for(
        lambda: (j := d.job(job))["runs"] and j["runs"][0]["ended_at"] and j,
        timeout,
        what=f"job {job}'s first Run to end",
    )


def is_claude(p: psutil.Process | None) -> bool:
    """Whether `p` runs claude (a process gone, or with no command line, does not)."""
    try:
        argv = p.cmdline() if p is not None else []
    except psutil.Error:
        return False
    return bool(argv) and "claude" in Path(argv[0]).name


def at(epoch: float) -> str:
    """A moment to come in a Run's reason ("at 08:10", "on Dec 7 at 00:03"), as Owl says it now."""
    return jobrules.at_words(epoch, time.time(), None)


def hhmm(epoch: float) -> str:
    """A moment to come on `owl status`'s lines ("08:10", "Dec 7 00:03"), as Owl shows it now."""
    return timefmt.ahead(epoch, time.time())


def test_a_usage_limit_is_waited_out_and_the_job_carries_on_by_itself(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [UsageLimit(reset_in=10), Bash(COMMIT), Text("Committed hello.txt.")]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub, oauth=True) as d:
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        other = d.add("sleep=0 write=other.txt commit=other", project, "--agent", "script")
        d.machine("idle")
        j = first_ended(d, job)
        reset = stub.main_requests()[0].reset
        first = j["runs"][0]
        assert first["outcome"] == "interrupted"
        assert first["reason"] == f"Claude's 5-hour usage limit; resets {at(reset)}"
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        assert first["session_id"] and first["last_message"].startswith("You've hit your 5-hour")
        limits = d.status()["limits"]
        assert [(w["agent"], w["kind"]) for w in limits] == [("claude", "five_hour")]
        assert limits[0]["until"] == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(reset))
        # (each `owl` call may take a second or two on a busy machine)
        if time.time() < reset - 3:
            assert f"claude waits until {hhmm(reset)}" in d.ok("status")
        if time.time() < reset - 3:
            assert "waiting:  Claude's 5-hour usage limit" in d.ok("jobs", "show", str(job))
        # a Job for another agent is not held back by claude's limit
        assert d.wait_job(other, "review", timeout=20)["runs"][0]["outcome"] == "succeeded"
        j = d.wait_job(job, "review", timeout=40)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "succeeded"]
        assert j["attempts_left"] == 1
        second = j["runs"][1]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        asked = stub.main_requests()
        assert asked[0].at < reset
        # claude was not started against the limit again before it reset
        assert all(r.at >= reset for r in asked[1:])
        assert any("usage limit" in t and "carry on" in t for t in asked[1].user_texts())
        assert d.status()["limits"] == []
        assert j["usage"]["num_turns"] >= 2 and j["usage"]["total_cost_usd"] > 0


def test_the_reset_time_is_read_from_the_text_when_nothing_else_gives_it(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        RateLimited("Claude AI usage limit reached|{reset}", times=2, reset_in=8),
        Text("Done."),
    ]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Say done.", project, "--attempts", "1")
        d.machine("idle")
        first = first_ended(d, job)["runs"][0]
        reset = stub.main_requests()[1].reset  # the CLI's retry: the reset it last saw
        assert first["outcome"] == "interrupted"
        assert first["reason"] == f"Claude's API rate limit (HTTP 429); resets {at(reset)}"
        j = d.wait_job(job, "review", timeout=40)
        assert j["attempts_left"] == 1 and len(j["runs"]) == 2
        assert all(r.at >= reset for r in stub.main_requests()[2:])


@pytest.mark.parametrize(
    "turn, reason",
    [
        (
            RateLimited(times=2),
            "Claude's API rate limit (HTTP 429); no reset time given, trying again ",
        ),
        (
            Overloaded(times=2),
            "Claude's model service failed (HTTP 529 overloaded); trying again ",
        ),
    ],
    ids=["api-key-429", "529-overloaded"],
)
def test_a_rate_limit_or_the_service_failing_backs_off_without_spending_an_attempt(
    tmp_path, turn, reason
):
    project = make_project(tmp_path / "proj")
    with AnthropicStub([turn]) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Say done.", project, "--attempts", "1")
        d.machine("idle")
        began = time.time()
        j = first_ended(d, job)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and first["reason"].startswith(reason)
        assert j["state"] == "pending" and j["attempts_left"] == 1
        [w] = d.status()["limits"]
        assert 290 <= w["until_epoch"] - began <= 310 + (time.time() - began)
        assert first["reason"].endswith(at(w["until_epoch"]))
        st = d.status()
        assert st["waiting"] == f"job {job} waits for {w['reason']}"
        assert len(d.job(job)["runs"]) == 1 and len(stub.main_requests()) == 2
    # with no daemon, `owl status` says so from the database
    offline = d.owl("status")
    assert offline.returncode == 3
    # the day it comes on is said when it is not today (a wait past midnight)
    until = timefmt.ahead(w["until_epoch"], time.time())
    assert f"claude waits until {until}: {w['reason']}" in offline.stdout
    # a restarted daemon keeps the wait
    with claude_daemon(tmp_path, stub) as d:
        d.machine("idle")
        assert [x["until_epoch"] for x in d.status()["limits"]] == [w["until_epoch"]]
        assert d.job(job)["state"] == "pending" and len(d.job(job)["runs"]) == 1


def alive(pids: list[int]) -> Iterator[psutil.Process]:
    """The processes of these pids that still run."""
    for pid in pids:
        try:
            yield psutil.Process(pid)
        except psutil.NoSuchProcess:
            continue


def test_a_run_killed_mid_tool_is_resumed_and_the_agent_sees_its_own_tool_call(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        Bash("echo start; sleep 8; echo x > late.txt", timeout_ms=60_000),
        Text("Carried on."),
    ]
    with (
        AnthropicStub(script) as stub,
        claude_daemon(tmp_path, stub, {"interruption": {"grace_window": "1s"}}) as d,
    ):
        job = d.add("Add a --verbose flag.", project)
        d.machine("idle")
        wait_for(
            lambda: stub.turns_served >= 1 and len(d.run_of(job)["pids"]) > 2,
            timeout=30,
            what="claude's Bash tool to be running",
        )
        # the daemon was started from inside a Claude Code session: its markers stay behind.
        # The agent is the Run's claude whose parent is not claude (the Run's own
        # sandbox starts it): claude itself sets CLAUDECODE for its Bash tool.
        procs = list(alive(d.run_of(job)["pids"]))  # a Bash tool's may be gone already
        [agent] = [p for p in procs if is_claude(p) and not is_claude(p.parent())]
        assert "claude" in Path(agent.cmdline()[0]).name
        agent_env = agent.environ()
        assert agent_env.get("OWL_RUN_ID") and "CLAUDECODE" not in agent_env
        assert "CLAUDE_CODE_ENTRYPOINT" not in agent_env
        d.machine("input")
        j = d.wait_job(job, "pending", timeout=20)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and first["session_id"]
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        second = j["runs"][1]
        assert second["resumed"] is True and j["attempts_left"] == j["attempts"]
        later = stub.main_requests()[-1]
        first_call = stub.main_requests()[0].turn
        assert any(u["input"]["command"] == first_call.input["command"] for u in later.tool_uses())
        assert any("grace window" in t for t in later.user_texts())
        assert "carried the conversation on" in d.ok("jobs", "show", str(job))


def test_a_reply_carries_the_work_on_in_the_same_conversation(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Bash(COMMIT), Text("Committed hello.txt."), Text("Added the goodbye too.")]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        d.machine("idle")
        d.wait_job(job, "review", timeout=30)
        p = d.owl("jobs", "reply", str(job + 100), "more")
        assert p.returncode == 1 and p.stderr.strip() == f"owl: no job {job + 100}"
        assert d.owl("jobs", "reply", str(job), "  ").returncode == 1
        out = d.ok("jobs", "reply", str(job), "Please also add a goodbye file.", "--first")
        assert "queued again at position 1" in out
        j = d.wait_job(job, "review", timeout=30)
        assert [r["resumed"] for r in j["runs"]] == [False, True]
        assert [r["text"] for r in j["replies"]] == ["Please also add a goodbye file."]
        assert j["replies"][0]["run_id"] == j["runs"][1]["id"]
        last = stub.main_requests()[-1]
        assert any("Please also add a goodbye file." in t for t in last.user_texts())
        assert any("git commit" in u["input"]["command"] for u in last.tool_uses())
        shown = d.ok("jobs", "show", str(job))
        assert "Please also add a goodbye file." in shown and "over all Runs" in shown
        assert j["runs"][1]["last_message"] == "Added the goodbye too."
        again = d.owl("jobs", "reply", str(job + 0), "x")
        assert again.returncode == 0  # review again: a second reply is taken too


def test_when_the_conversation_cannot_be_resumed_the_same_run_starts_afresh(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        Bash("mkdir -p .owl && echo 'hello is next' > .owl/HANDOFF.md && echo ok"),
        Text("Wrote the handoff."),
        Text("Started afresh."),
    ]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Add a hello file.", project, "--attempts", "1")
        d.machine("idle")
        d.wait_job(job, "review", timeout=30)
        # the CLI's transcripts are gone (another machine, a cleaned config folder)
        claude_state = the_kept_state(
            tmp_path / "owl", "claude", tmp_path / "user-home" / ".claude"
        )
        shutil.rmtree(claude_state / "projects")
        d.owl("jobs", "reply", str(job), "-", input="Now the hello file, please.\n")
        # two contained starts of the CLI in one Run: slow on a busy machine
        j = d.wait_job(job, "review", timeout=60)
        assert len(j["runs"]) == 2 and j["attempts_left"] == 1
        second = j["runs"][1]
        assert second["outcome"] == "succeeded" and second["resumed"] is False
        assert second["session_id"] and second["session_id"] != j["runs"][0]["session_id"]
        fresh = stub.main_requests()[-1]
        text = "\n".join(fresh.user_texts())
        assert "hello is next" in text and "Now the hello file, please." in text
        assert fresh.tool_uses() == []
        assert "could not be resumed" in d.ok("logs", "--run", str(second["id"]), "--raw")


def test_with_resume_off_every_run_starts_fresh_with_the_handoff_and_the_reply(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        Bash("mkdir -p .owl && echo 'hello is next' > .owl/HANDOFF.md && echo ok"),
        Text("Wrote the handoff."),
        Text("Fresh."),
    ]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub, resume=False) as d:
        job = d.add("Add a hello file.", project)
        d.machine("idle")
        d.wait_job(job, "review", timeout=30)
        d.ok("jobs", "reply", str(job), "Go on with the hello file.")
        j = d.wait_job(job, "review", timeout=30)
        assert [r["resumed"] for r in j["runs"]] == [False, False]
        fresh = stub.main_requests()[-1]
        text = "\n".join(fresh.user_texts())
        assert "--- Attempt 1, run 2 ---" in text and "hello is next" in text
        assert "Go on with the hello file." in text and fresh.tool_uses() == []
        assert j["runs"][1]["session_id"] not in (None, j["runs"][0]["session_id"])


def test_after_the_daemon_dies_mid_run_the_next_run_carries_the_conversation_on(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        Bash("echo start; sleep 8; echo x > late.txt", timeout_ms=60_000),
        Text("Back after the restart."),
    ]
    with AnthropicStub(script) as stub:
        with claude_daemon(tmp_path, stub) as d:
            job = d.add("Add a --verbose flag.", project)
            d.machine("idle")
            wait_for(
                lambda: stub.turns_served >= 1 and d.job(job)["runs"][0]["session_id"],
                timeout=30,
                what="claude's session id recorded while it works",
            )
            session = d.job(job)["runs"][0]["session_id"]
            # Claude Code writes the conversation to its transcript as it goes: a
            # kill before the tool call is in it leaves nothing to resume.
            wait_for(
                lambda: any(
                    "sleep 8" in t.read_text(errors="replace")
                    for kept in kept_state(
                        tmp_path / "owl", "claude", tmp_path / "user-home" / ".claude"
                    )
                    for t in kept.rglob(f"{session}.jsonl")
                ),
                timeout=15,
                what="claude's transcript to hold the tool call",
            )
            d.kill()
        with claude_daemon(tmp_path, stub) as d:
            d.machine("idle")
            j = d.wait_job(job, "review", timeout=40)
            assert j["runs"][0]["outcome"] == "interrupted"
            assert j["runs"][1]["resumed"] is True and j["runs"][1]["session_id"] == session
            later = stub.main_requests()[-1]
            assert any(u["input"]["command"].startswith("echo start") for u in later.tool_uses())
            assert not (Path(j["worktree"]) / "late.txt").exists()


def test_a_failed_check_is_told_to_the_resumed_conversation_and_a_blocked_job_takes_a_reply(
    tmp_path,
):
    checks = (
        "[[checks]]\nname = 'hello'\nrun = 'test -f hello.txt || { echo no hello.txt; exit 1; }'\n"
    )
    project = make_project(tmp_path / "proj", {"README": "x\n", ".owl.toml": checks})
    script = [Text("Nothing to do."), Text("Still nothing."), Bash(COMMIT), Text("Committed.")]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Add a hello file and commit it.", project, "--attempts", "2")
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=60)
        assert [r["outcome"] for r in j["runs"]] == ["failed", "failed"]
        assert j["runs"][1]["resumed"] is True
        told = "\n".join(stub.main_requests()[1].user_texts())
        assert "check hello failed" in told and "no hello.txt" in told
        d.ok("jobs", "reply", str(job), "The check wants hello.txt committed.")
        j = d.wait_job(job, "review", timeout=40)
        assert j["attempts"] == 3 and [r["resumed"] for r in j["runs"]] == [False, True, True]
        assert any(
            "The check wants hello.txt committed." in t
            for t in stub.main_requests()[2].user_texts()
        )


LIMITED_ONCE = """
import os, pathlib, subprocess, sys
flag = pathlib.Path(os.environ["OWL_WORKTREE"]) / ".owl" / ("limited-" + sys.argv[1])
if not flag.exists():
    flag.parent.mkdir(exist_ok=True)
    flag.write_text("x")
    print("working on it")
    print("ERROR: You've hit your usage limit. Try again in 4 seconds.", flush=True)
    sys.exit(75)
pathlib.Path("done.txt").write_text("ok\\n")
subprocess.run(["git", "add", "done.txt"], check=True)
subprocess.run(["git", "commit", "-q", "-m", "done"], check=True)
"""


def test_a_command_agent_that_opts_in_waits_out_its_limit_too(tmp_path):
    project = make_project(tmp_path / "proj")
    cfg = {
        "agents": {
            "codex": {
                "command": [sys.executable, "-c", LIMITED_ONCE, "{job_id}"],
                "limit_pattern": "(?i)usage limit",
                "limit_exit_code": 75,
            }
        }
    }
    with AnthropicStub([]) as stub, claude_daemon(tmp_path, stub, cfg) as d:
        job = d.add("Do it.", project, "--agent", "codex", "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and first["resumed"] is None
        assert first["reason"].startswith("codex's usage limit; resets ")
        [w] = d.status()["limits"]
        assert (w["agent"], w["kind"]) == ("codex", "usage")
        j = d.wait_job(job, "review", timeout=30)
        assert j["attempts_left"] == 1 and len(j["runs"]) == 2
        second_started = time.mktime(time.strptime(j["runs"][1]["started_at"], "%Y-%m-%dT%H:%M:%S"))
        assert second_started >= int(w["until_epoch"])


def test_any_other_api_error_fails_the_run_and_spends_an_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with (
        AnthropicStub([ApiError(400, "prompt is too long")]) as stub,
        claude_daemon(tmp_path, stub) as d,
    ):
        job = d.add("Say done.", project, "--attempts", "2")
        d.machine("idle")
        j = first_ended(d, job)
        assert j["runs"][0]["outcome"] == "failed" and j["attempts_left"] == 1
        assert d.status()["limits"] == []


def test_a_wait_past_midnight_says_its_day_on_every_line_of_owl_status():
    from datetime import datetime

    from owl.cli import carry

    now = datetime(2026, 12, 5, 23, 56).timestamp()
    until = datetime(2026, 12, 6, 0, 1).timestamp()
    [(label, text)] = carry.agents_fact([("claude", until)], known=["claude"], now=now)
    assert (label, text) == ("agents", "claude waits until Dec 6 00:01")
    [(_, today)] = carry.agents_fact([("claude", until)], known=["claude"], now=until - 60)
    assert today == "claude waits until 00:01"
