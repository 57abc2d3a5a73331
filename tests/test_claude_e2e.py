"""The whole loop with the REAL Claude Code CLI, through the real daemon.

Only the model is replaced: `support.anthropic_stub` serves a scripted
conversation on 127.0.0.1, the daemon runs the built-in `claude` agent, and
the CLI's own Bash tool edits, commits, sleeps and writes in the Job's
worktree. The daemon gets the stub's environment (and a throw-away HOME), so
every agent it starts talks to the stub.

Without the CLI these tests fail (tools/install-claude.sh installs it).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest
from support.anthropic_stub import AnthropicStub, Bash, Text
from support.claude import require_claude
from support.person import Person

from owlproc import OwlDaemon, make_project, wait_for

pytestmark = pytest.mark.claude

CHECKS = "[[checks]]\nname = 'hello'\nrun = 'test -f hello.txt && echo hello is there'\n"
COMMIT = (
    "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
)


def claude_daemon(
    tmp_path: Path,
    stub: AnthropicStub,
    config: dict | None = None,
    manual: bool = True,
    env: dict | None = None,
) -> OwlDaemon:
    claude = require_claude()
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    cfg = {"agents": {"claude": {"path": claude}}, "agent": {"default": "claude"}}
    for k, v in (config or {}).items():
        cfg.setdefault(k, {}).update(v)
    d = OwlDaemon(
        tmp_path / "owl", cfg, manual=manual, agent=False, env={**(env or {}), **stub.env(home)}
    )
    if not manual:
        d.env.pop("OWL_MACHINE", None)
    return d


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_claude_job_commits_passes_its_checks_and_its_log_reads_well(tmp_path):
    project = make_project(tmp_path / "proj", {"README": "x\n", ".owl.toml": CHECKS})
    with (
        AnthropicStub([Bash(COMMIT), Text("Committed hello.txt.")]) as stub,
        claude_daemon(tmp_path, stub) as d,
    ):
        job = d.add("Add a hello file and commit it.", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        [run] = j["runs"]
        assert (run["outcome"], run["exit_code"]) == ("succeeded", 0)
        assert [(c["name"], c["passed"], c["output"]) for c in run["checks"]] == [
            ("hello", True, "hello is there\n")
        ]
        assert git(project, "log", "--format=%s", f"{j['base']}..owl/job-{job}") == "Add hello"
        assert git(project, "show", f"owl/job-{job}:hello.txt") == "hello"
        assert d.status()["notice"] == f"Job {job} ready for review — 1 check passed"
        log = d.ok("logs", "--run", str(run["id"]))
        assert "→ Bash: echo hello > hello.txt" in log
        assert "← committed" in log
        assert "✓ result: Committed hello.txt." in log
        assert '"type":' not in log  # rendered, not raw stream-json


def _tool_processes(d: OwlDaemon, job: int) -> list[psutil.Process]:
    """The Bash tool's shell and its `sleep`, as found in the Run's own process list."""
    r = d.run_of(job)
    out = []
    for pid in r["pids"] if r else []:
        try:
            p = psutil.Process(pid)
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "sleep 8" in cmd:
            out.append(p)
    return out if any(p.name() == "sleep" for p in out) else []


def _top_of(pids: list[int]) -> int:
    """The Run's first process (claude), the one whose parent is none of the
    Run's: the pids are recorded in order of number, and on a machine whose
    pid counter has come round (a whole suite's worth of processes) the
    lowest may be the tool's."""
    inside = set(pids)
    [top] = [p for p in pids if psutil.Process(p).ppid() not in inside]
    return top


def test_input_freezes_claudes_tool_the_grace_window_kills_it_and_the_handoff_carries_on(tmp_path):
    handoff = "Halfway: the config parser is done, the CLI flag is next."
    project = make_project(tmp_path / "proj")
    script = [
        Bash(f"mkdir -p .owl && printf '%s\\n' '{handoff}' > .owl/HANDOFF.md && echo noted"),
        Bash("echo start; sleep 8; echo x > late.txt", timeout_ms=60_000),
        # the second Run: the script's next turn ends it
        Text("Picked up from the handoff."),
    ]
    with (
        AnthropicStub(script) as stub,
        claude_daemon(tmp_path, stub, {"interruption": {"grace_window": "2s"}}) as d,
    ):
        job = d.add("Add a --verbose flag.", project)
        d.machine("idle")
        tools = wait_for(
            lambda: _tool_processes(d, job),
            timeout=30,
            what="claude's Bash tool running the long command",
        )
        claude_pid = _top_of(d.run_of(job)["pids"])
        worktree = Path(d.job(job)["worktree"])
        assert (worktree / ".owl" / "HANDOFF.md").read_text().strip() == handoff
        # the tool runs in a session of its own, not claude's
        assert all(os.getsid(p.pid) != os.getsid(claude_pid) for p in tools)
        d.machine("input")
        d.wait_run(job, "frozen")
        wait_for(
            lambda: all(p.status() == psutil.STATUS_STOPPED for p in tools),
            what="the tool's own processes stopped",
        )
        assert psutil.Process(claude_pid).status() == psutil.STATUS_STOPPED
        # the grace window (2 s) ends the Run; the tool never gets to write
        j = d.wait_job(job, "pending", timeout=15)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and j["attempts_left"] == j["attempts"]
        wait_for(
            lambda: all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in tools),
            what="the tool's processes gone",
        )
        assert not (worktree / "late.txt").exists()
        # the person leaves again: the next Run carries the conversation on,
        # told why it was stopped, with the handoff quoted
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        assert len(j["runs"]) == 2 and j["runs"][1]["outcome"] == "succeeded"
        assert j["runs"][1]["resumed"] is True
        assert not (worktree / "late.txt").exists()
        prompts = [
            t for r in stub.main_requests() for t in r.user_texts() if "Add a --verbose flag." in t
        ]
        assert "--- Attempt 2 ---" not in prompts[0]
        later = stub.main_requests()[-1].user_texts()
        assert any(handoff in t and "grace window" in t for t in later)


@pytest.fixture
def desktop() -> Iterator[dict]:
    from display import virtual_display

    with virtual_display() as env:
        yield env


def test_from_idle_to_review_with_nothing_typed_after_owl_add(tmp_path, desktop):
    project = make_project(tmp_path / "proj", {"README": "x\n", ".owl.toml": CHECKS})
    with (
        AnthropicStub([Bash(COMMIT), Text("Done.")]) as stub,
        claude_daemon(
            tmp_path, stub, {"idle": {"after": "1s"}}, manual=False, env=dict(desktop)
        ) as d,
        Person(desktop) as person,
    ):
        job = d.add("Add a hello file and commit it.", project)
        time.sleep(1.5)  # the person is still there: nothing starts
        assert d.job(job)["state"] == "pending" and d.status()["machine"]["idle"] is False
        left = person.leave()
        # The premise: the person never stood still for idle.after while there
        # (had they, Owl would rightly have started, and frozen the Run on their return).
        assert person.longest_gap() < 1.0, f"the person was still for {person.longest_gap():.2f} s"
        j = d.wait_job(job, "review", timeout=30)
        # one Run, its check passed: a Run before it that ended some other way
        # is named here with how and why, not taken for a Run without checks
        runs = [(r["id"], r["outcome"], r["ended_by"], r["reason"]) for r in j["runs"]]
        assert len(runs) == 1, (runs, d.told_so_far(job))
        started = j["runs"][0]["started_at"]
        assert started is not None and time.monotonic() - left >= 1.0
        assert [(c["name"], c["passed"]) for c in j["runs"][0]["checks"]] == [("hello", True)], (
            d.told_so_far(job)
        )
        assert git(project, "log", "--format=%s", f"{j['base']}..owl/job-{job}") == "Add hello"
        assert stub.turns_served >= 1


def test_a_person_still_for_idle_after_who_stays_back_past_the_grace_window_ends_that_run(
    tmp_path, desktop
):
    """A person who stops moving for longer than idle.after has left, as far as
    anyone can tell: Owl starts the Job. Back for longer than the grace window,
    they have come back: that Run ends interrupted, with no checks (they run
    after the agent), and the Job reaches review on its next Run. The first
    Run's missing checks are its own story, told by its outcome and reason."""
    project = make_project(tmp_path / "proj", {"README": "x\n", ".owl.toml": CHECKS})
    with (
        AnthropicStub(
            [
                Bash("echo working; sleep 30; echo slept", timeout_ms=60_000),
                Bash(COMMIT),
                Text("Done."),
            ]
        ) as stub,
        claude_daemon(
            tmp_path, stub, {"idle": {"after": "1s"}}, manual=False, env=dict(desktop)
        ) as d,
    ):
        with Person(desktop):
            job = d.add("Add a hello file and commit it.", project)
        first = d.wait_run(job, "running", timeout=15)
        wait_for(lambda: stub.turns_served >= 1, 20, what="the agent's first tool call")
        with Person(desktop):  # back, for longer than the 3 s grace window
            d.wait_run(job, "frozen", timeout=5)
            wait_for(
                lambda: d.job(job)["runs"][0]["outcome"] == "interrupted",
                15,
                what="the first Run ended",
            )
        j = d.wait_job(job, "review", timeout=45)
        one, two = j["runs"]
        assert one["id"] == first["id"] and one["checks"] == []
        assert (one["outcome"], one["reason"]) == (
            "interrupted",
            "the grace window passed while the machine was in use",
        )
        assert two["outcome"] == "succeeded"
        assert [(c["name"], c["passed"]) for c in two["checks"]] == [("hello", True)]
