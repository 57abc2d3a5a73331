"""A Claude turn ended by its usage limit's checkpoint is a wait, not a finish: REAL CLI.

Near 95 % of the five-hour window the service makes the model finish its step,
list the work that remains and end its turn; the CLI exits 0. The stub answers
as the service does then: the unified rate-limit headers with the five-hour
window at 96 % and `allowed_warning` (which the CLI turns into its
`rate_limit_event`), and a turn that ends with such a list. Owl reads the
event, never the prose: the Run ends "stopped at the limit", no check runs, no
attempt is spent, and after the window's reset the same conversation is told
to carry on with the work it listed.

Without the CLI these tests fail (tools/install-claude.sh installs it).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from support.anthropic_stub import AnthropicStub, Bash, Text, Windows

from owlproc import make_project
from test_claude_limits import COMMIT, claude_daemon, first_ended, hhmm

pytestmark = pytest.mark.claude

LISTED = (
    "Usage limit approaching, so I am checkpointing here. Done: read the project. "
    "Remaining work:\n1. Add hello.txt\n2. Commit it"
)
CHECKS = ".owl.toml"


def with_a_check(project: Path) -> None:
    """A check that leaves a mark in the worktree each time it runs (none should, here)."""
    (project / CHECKS).write_text('[[checks]]\nname = "mark"\nrun = "echo ran >> check-ran.txt"\n')
    subprocess.run(["git", "-C", str(project), "add", CHECKS], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", "checks"], check=True)


def test_a_turn_ended_at_the_checkpoint_waits_for_the_reset_then_carries_on(tmp_path):
    project = make_project(tmp_path / "proj")
    week = int(time.time()) + 3 * 86400
    first_seen: list[int] = []

    def near_the_limit(at: float) -> tuple[tuple[str, str], ...]:
        # the five-hour window resets 25 s after the first answer
        first_seen.append(int(at) + 25)
        return Windows((0.96, first_seen[0]), (0.40, week), status="allowed_warning")

    script = [Text(LISTED), Bash(COMMIT), Text("Committed hello.txt.")]
    # keep only 2 % of the five-hour window: the service's checkpoint comes first
    config = {"budget": {"keep_five_hour": "2%"}}
    with (
        AnthropicStub(script) as stub,
        claude_daemon(tmp_path, stub, config, oauth=True) as d,
    ):
        stub.answer_with(near_the_limit)
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job, timeout=90)
        reset = first_seen[0]
        first = j["runs"][0]
        assert first["exit_code"] == 0
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith(
            "Claude stopped at the limit (its 5-hour usage limit's checkpoint); resets "
        )
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        assert first["session_id"] and first["last_message"].endswith("2. Commit it")
        [w] = d.status()["limits"]
        assert (w["agent"], w["kind"], w["until_epoch"]) == ("claude", "five_hour", reset)
        asked = len(stub.main_requests())
        # the window resets: fresh readings from now on
        stub.answer_with(Windows((0.02, reset + 18000), (0.41, week)))
        j = d.wait_job(job, "review", timeout=120)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "succeeded"]
        assert j["attempts_left"] == 1
        second = j["runs"][1]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        later = stub.main_requests()[asked:]
        assert all(r.at >= reset for r in later)  # nothing asked before the reset
        told = later[0].user_texts()
        assert any("checkpoint" in t and "carry on with that work" in t for t in told)
        assert "2. Commit it" in json.dumps(later[0].body)  # the conversation, carried on
        assert "Add hello" in d.ok("jobs", "show", str(job))


def test_no_check_runs_on_a_turn_ended_at_the_checkpoint(tmp_path):
    project = make_project(tmp_path / "proj")
    with_a_check(project)
    far = int(time.time()) + 3600
    with (
        AnthropicStub([Text(LISTED)]) as stub,
        claude_daemon(tmp_path, stub, {"budget": {"keep_five_hour": "0%"}}, oauth=True) as d,
    ):
        stub.answer_with(Windows((0.97, far), (0.40, far + 86400), status="allowed_warning"))
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job, timeout=90)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted" and "stopped at the limit" in first["reason"]
        assert j["state"] == "pending" and j["attempts_left"] == 1
        assert not (Path(j["worktree"]) / "check-ran.txt").exists()


def test_owls_own_line_below_the_checkpoint_stops_the_run_first(tmp_path):
    """Keeping 15% of the five-hour window puts Owl's line (85%) under the
    service's checkpoint (95%): with the window at 96% and the service's
    `allowed_warning`, Owl's headroom ends the Run first, mid-tool, as an
    interruption in its own words, as before the checkpoint was read; the
    checkpoint's turn is never asked for, and the checkpoint is not what ended it."""
    project = make_project(tmp_path / "proj")
    reset = int(time.time()) + 3600
    week = reset + 3 * 86400

    script = [Bash("python3 -c 'import time; time.sleep(90)'", timeout_ms=180_000), Text(LISTED)]
    with (
        AnthropicStub(script) as stub,
        claude_daemon(tmp_path, stub, {"budget": {"keep_five_hour": "15%"}}, oauth=True) as d,
    ):
        # the service's own checkpoint reading on every answer: both lines are passed
        stub.answer_with(Windows((0.96, reset), (0.40, week), status="allowed_warning"))
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job, timeout=90)
        first = j["runs"][0]
        words = (
            f"claude: keeping 15% of your five-hour window for you — 96% used, resets {hhmm(reset)}"
        )
        assert first["outcome"] == "interrupted" and first["reason"] == words, first
        assert "checkpoint" not in first["reason"] and "stopped at the limit" not in first["reason"]
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        [w] = d.status()["limits"]
        assert (w["agent"], w["kind"], w["until_epoch"]) == ("claude", "budget:five_hour", reset)
        assert len(stub.main_requests()) == 1  # the checkpoint's turn was never asked for
        assert stub.turns_served == 1
