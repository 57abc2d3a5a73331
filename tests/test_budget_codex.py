"""The budget with the REAL Codex CLI against the Responses API stub.

The stub answers with the rate-limit headers Codex reads
(`x-codex-primary-used-percent`, `-window-minutes`, `-reset-at`, and
`secondary`); `codex exec --json` prints none of them, and Owl reads them
from the thread's rollout file when the Run ends. Its token counts are what
the token caps count (Codex states no dollars).

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import time

import pytest
from support.responses_stub import ResponsesStub, Say, Shell, Windows
from test_codex_gemini import COMMIT, agent_daemon

from owlproc import make_project, wait_for

from owl.rules import timefmt

pytestmark = pytest.mark.agent_clis


def hhmm(epoch: float) -> str:
    """A moment to come as Owl shows it now ("08:10", "Dec 7 00:03")."""
    return timefmt.ahead(epoch, time.time())


def test_codexs_windows_hold_its_next_job_at_the_line(tmp_path):
    project = make_project(tmp_path / "proj")
    reset = int(time.time()) + 3600
    week = int(time.time()) + 4 * 86400
    script = [Shell(COMMIT), Say("Committed hello.txt."), Say("Second.")]
    with ResponsesStub(script) as stub, agent_daemon(tmp_path, "codex", stub) as d:
        stub.answer_with(Windows((85, 300, reset), (42, 10080, week)))
        job = d.add("Add a hello file and commit it.", project, "--agent", "codex")
        later = d.add("Say second.", project, "--agent", "codex")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=90)
        assert [r["outcome"] for r in j["runs"]] == ["succeeded"]
        words = (
            f"codex: keeping 20% of your five-hour window for you — 85% used, resets {hhmm(reset)}"
        )
        st = wait_for(lambda: (s := d.status())["limits"] and s, 10, what="codex's hold")
        [w] = st["limits"]
        assert (w["agent"], w["kind"], w["reason"], w["until_epoch"]) == (
            "codex",
            "budget:five_hour",
            words,
            reset,
        )
        assert [(x["window"], x["used"]) for x in st["budget"]["windows"]] == [
            ("five_hour", 0.85),
            ("seven_day", 0.42),
        ]
        assert d.job(later)["state"] == "pending" and not d.job(later)["runs"]
        assert f"waiting:  {words}" in d.ok("jobs", "show", str(later))
        assert words in d.ok("status")


def test_codexs_tokens_count_toward_the_days_token_cap(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [Say("One."), Say("Two.")]
    cfg = {"budget": {"daily_tokens": 100}}
    with ResponsesStub(script) as stub, agent_daemon(tmp_path, "codex", stub, cfg) as d:
        jobs = [d.add(f"Say {n}.", project, "--agent", "codex") for n in ("one", "two")]
        d.machine("idle")
        j = d.wait_job(jobs[0], "review", timeout=90)
        used = j["usage"]["input_tokens"] + j["usage"]["output_tokens"]
        st = wait_for(lambda: (s := d.status())["budget"]["held"] and s, 10, what="the hold")
        assert st["budget"]["today"]["tokens"] == used
        assert st["budget"]["held"]["reason"] == (
            f"today's {used:,} tokens reached budget.daily_tokens (100); work goes on at midnight"
        )
        assert d.job(jobs[1])["state"] == "pending" and not d.job(jobs[1])["runs"]
