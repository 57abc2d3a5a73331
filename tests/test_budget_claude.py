"""The budget with the REAL Claude Code CLI: the headroom kept, the day's money.

The real daemon runs the pinned Claude Code CLI against the Messages API stub,
which answers with the subscription's unified rate-limit headers
(`anthropic-ratelimit-unified-5h-utilization`, `-5h-reset`, `-7d-…`) the CLI
turns into its `rate_limit_event`, or, for an API key, with as many output
tokens as make the Run cost what the test wants (the CLI counts its
`total_cost_usd` from them).

Without the CLI these tests fail (tools/install-claude.sh installs it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.anthropic_stub import AnthropicStub, Bash, Text, Windows

from owlproc import make_project, wait_for
from test_claude_limits import COMMIT, claude_daemon, first_ended, hhmm

pytestmark = pytest.mark.claude


def test_a_job_is_held_at_the_line_and_carries_on_by_itself_after_the_reset(tmp_path):
    project = make_project(tmp_path / "proj")
    script = [
        Bash("python3 -c 'import time; time.sleep(90)'", timeout_ms=180_000),
        Bash(COMMIT),
        Text("Committed hello.txt."),
    ]
    week = int(time.time()) + 3 * 86400
    first_seen: list[int] = []

    def windows(at: float) -> tuple[tuple[str, str], ...]:
        # the five-hour window resets 30 s after the first answer, however
        # long the CLI took to start on a busy machine
        first_seen.append(int(at) + 30)
        return Windows((0.85, first_seen[0]), (0.42, week))

    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub, oauth=True) as d:
        stub.answer_with(windows)
        job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job, timeout=90)
        reset = first_seen[0]
        words = (
            f"claude: keeping 20% of your five-hour window for you — 85% used, resets {hhmm(reset)}"
        )
        first = j["runs"][0]
        # ended by Owl while the agent slept in its tool: an interruption, no attempt spent
        assert first["outcome"] == "interrupted" and first["reason"] == words
        assert j["attempts_left"] == 1 and j["state"] in ("pending", "active")
        assert first["session_id"]
        st = d.status()
        [w] = st["limits"]
        assert (w["agent"], w["kind"], w["reason"]) == ("claude", "budget:five_hour", words)
        assert w["until_epoch"] == reset
        b = st["budget"]
        assert [(x["window"], x["used"], x["over"]) for x in b["windows"]] == [
            ("five_hour", 0.85, True),
            ("seven_day", 0.42, False),
        ]
        if time.time() < reset - 4:  # (each `owl` call may take a second or two)
            assert words in d.ok("status")
            assert f"waiting:  {words}" in d.ok("jobs", "show", str(job))
        asked = len(stub.main_requests())
        # the reset: the window is fresh again; the Job carries on by itself
        stub.answer_with(Windows((0.05, reset + 18000), (0.43, week)))
        j = d.wait_job(job, "review", timeout=120)
        assert [r["outcome"] for r in j["runs"]] == ["interrupted", "succeeded"]
        assert j["attempts_left"] == 1
        second = j["runs"][1]
        assert second["resumed"] is True and second["session_id"] == first["session_id"]
        # nothing was asked of the model between the hold and the reset
        assert all(r.at >= reset for r in stub.main_requests()[asked:])
        assert d.status()["limits"] == []
        log = d.log_text()
        assert "claude waits until" in log and "under the line kept for you" in log


def test_a_hostile_reading_is_logged_and_never_acted_on(tmp_path):
    project = make_project(tmp_path / "proj")
    with AnthropicStub([Text("Done.")]) as stub, claude_daemon(tmp_path, stub, oauth=True) as d:
        # 2.1.332 drops a window whose reset is past, and passes these on
        stub.answer_with(Windows((0.9, time.time() + 3 * 365 * 86400), (7.5, time.time() + 86400)))
        job = d.add("Say done.", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=120)
        assert [r["outcome"] for r in j["runs"]] == ["succeeded"]
        st = d.status()
        assert st["limits"] == [] and st["budget"]["windows"] == []
        log = d.log_text()
        assert "claude reported a reset at" in log and "more than 8 days away" in log
        assert "claude reported a utilization of 7.5, not between 0 and 1.5" in log


def posix_tz_with_midnight_in(seconds: float) -> tuple[str, float]:
    """A TZ value whose local midnight comes `seconds` from now, and that moment."""
    at = int(time.time() + seconds)
    offset = at % 86400  # local = UTC - offset: midnight at `at`
    h, rest = divmod(offset, 3600)
    m, s = divmod(rest, 60)
    return f"OWL+{h:02d}:{m:02d}:{s:02d}", float(at)


def test_an_api_key_reaching_daily_usd_holds_the_third_job_until_midnight(tmp_path):
    project = make_project(tmp_path / "proj")
    # Two Runs of about a dollar each reach the $1.50 a day (however long they
    # take on a busy machine: the daemon's day ends an hour on); then the daemon
    # starts again in a zone whose day turns for real 30 s on, and the books it
    # reads back from its store hold the third Job until then, and no longer.
    tz, midnight = posix_tz_with_midnight_in(3600)
    with AnthropicStub([Text("One."), Text("Two."), Text("Three.")]) as stub:
        stub.answer_with(output_tokens=50_000)
        d = claude_daemon(tmp_path, stub, {"budget": {"daily_usd": 1.5}})
        d.env["TZ"] = tz
        with d:
            jobs = [d.add(f"Say {n}.", project, "--attempts", "1") for n in ("one", "two", "three")]
            d.machine("idle")
            d.wait_job(jobs[0], "review", timeout=120)
            d.wait_job(jobs[1], "review", timeout=120)
            st = wait_for(
                lambda: (s := d.status())["budget"]["held"] and s, 10, what="the day's hold"
            )
            costs = [d.job(j)["usage"]["total_cost_usd"] for j in jobs[:2]]
            assert all(0.5 < c < 1.5 for c in costs)
            held = st["budget"]["held"]
            assert held["until_epoch"] == midnight and held["kind"] == "budget:daily_usd"
            total = sum(costs)
            said = (
                f"today's ${total:.2f} reached budget.daily_usd ($1.50); work goes on at midnight"
            )
            assert held["reason"] == said and st["waiting"] == said
            today = st["budget"]["today"]
            assert today["usd"] == pytest.approx(total, abs=1e-3)
            # on an API key the figure is the bill, and nothing says otherwise
            assert (today["cost_kind"], today["billed"], today["api_equivalent_usd"]) == (
                "billed",
                True,
                0,
            )
            assert d.job(jobs[2])["state"] == "pending" and not d.job(jobs[2])["runs"]
            text = d.ok("status")
            assert f"today ${total:.2f} of $1.50 · " in text and said in text
            assert "not billed" not in text
            assert f"waiting:  {said}" in d.ok("jobs", "show", str(jobs[2]))
            # a Run over its own cap failed its bound: not these, they stayed within none
            assert all(d.job(j)["attempts_left"] == 1 for j in jobs[:2])
            # the daemon again, where the day turns 30 s from now: the same day's hold
            d.stop()
            d.env["TZ"], midnight = posix_tz_with_midnight_in(30)
            d.start()
            d.machine("idle")
            held = wait_for(
                lambda: time.time() >= midnight - 5 or d.status()["budget"]["held"],
                30,
                what="the day's hold read back",
            )
            if held is not True:  # (not when the start took most of the 30 s)
                assert held["until_epoch"] == midnight and held["reason"] == said
                assert d.job(jobs[2])["state"] == "pending" and not d.job(jobs[2])["runs"]
            # the day turns: the third carries on by itself, and the day starts at $0
            j = d.wait_job(jobs[2], "review", timeout=max(10, midnight - time.time() + 40))
            assert time.time() >= midnight
            assert j["runs"][0]["started_at"][11:13] == "00"  # the daemon's new day
            st = d.status()
            assert st["budget"]["held"] is None
            assert st["budget"]["today"]["usd"] == pytest.approx(
                j["usage"]["total_cost_usd"], abs=1e-3
            )


def test_a_subscriptions_cost_is_said_as_the_api_equivalent_and_daily_usd_limits_it(tmp_path):
    """Signed in by OAuth the CLI counts a cost all the same: Owl says it is
    not billed, and `budget.daily_usd` holds the queue on that figure."""
    project = make_project(tmp_path / "proj")
    with AnthropicStub([Text("One."), Text("Two.")]) as stub:
        stub.answer_with(output_tokens=5_000)
        with claude_daemon(tmp_path, stub, {"budget": {"daily_usd": 0.04}}, oauth=True) as d:
            jobs = [d.add(f"Say {n}.", project, "--attempts", "1") for n in ("one", "two")]
            d.machine("idle")
            j = d.wait_job(jobs[0], "review", timeout=120)
            cost = j["usage"]["total_cost_usd"]
            assert cost > 0.04 and j["usage"]["billed"] is False
            assert j["runs"][0]["usage"]["billed"] is False
            st = wait_for(
                lambda: (s := d.status())["budget"]["held"] and s, 10, what="the day's hold"
            )
            today = st["budget"]["today"]
            assert today["usd"] == pytest.approx(cost, abs=1e-3)
            assert (today["cost_kind"], today["billed"]) == ("api-equivalent", False)
            assert today["api_equivalent_usd"] == pytest.approx(cost, abs=1e-3)
            said = (
                f"today's ${cost:.2f} (API-equivalent, not billed) reached "
                "budget.daily_usd ($0.04); work goes on at midnight"
            )
            assert st["budget"]["held"]["reason"] == said
            text = d.ok("status")
            assert f"today ${cost:.2f} of $0.04, API-equivalent, not billed · " in text
            assert said in text
            shown = d.ok("jobs", "show", str(jobs[0]))
            assert f"${cost:.4f} (API-equivalent, not billed)" in shown
            assert d.job(jobs[1])["state"] == "pending" and not d.job(jobs[1])["runs"]


def test_a_run_over_run_usd_failed_its_bound_and_spends_an_attempt(tmp_path):
    project = make_project(tmp_path / "proj")
    with AnthropicStub([Text("Costly."), Text("Cheap.")]) as stub:
        stub.answer_with(output_tokens=50_000)
        with claude_daemon(tmp_path, stub, {"budget": {"run_usd": 0.5}}) as d:
            job = d.add("Say costly.", project, "--attempts", "2")
            d.machine("idle")
            j = first_ended(d, job, timeout=120)
            first = j["runs"][0]
            cost = first["usage"]["total_cost_usd"]
            assert first["outcome"] == "failed"
            assert first["reason"] == f"the Run cost ${cost:.2f}, over budget.run_usd ($0.50)"
            stub.answer_with(output_tokens=5)
            j = d.wait_job(job, "review", timeout=120)
            assert [r["outcome"] for r in j["runs"]] == ["failed", "succeeded"]
            assert j["attempts_left"] == 1


def test_finish_run_lets_the_run_finish_and_holds_the_next(tmp_path: Path):
    project = make_project(tmp_path / "proj")
    with AnthropicStub([Bash(COMMIT), Text("Committed.")]) as stub:
        reset = int(time.time()) + 3600
        stub.answer_with(Windows((0.9, reset)))
        cfg = {"budget": {"finish_run": True}}
        with claude_daemon(tmp_path, stub, cfg, oauth=True) as d:
            job = d.add("Add a hello file and commit it.", project, "--attempts", "1")
            later = d.add("Say done.", project, "--attempts", "1")
            d.machine("idle")
            j = d.wait_job(job, "review", timeout=120)
            assert [r["outcome"] for r in j["runs"]] == ["succeeded"]
            words = "claude: keeping 20% of your five-hour window for you — 90% used, resets "
            [w] = d.status()["limits"]
            assert w["reason"].startswith(words)
            assert d.job(later)["state"] == "pending" and not d.job(later)["runs"]
            # a Shift that spends lets it go on, and status says so
            out = d.ok("shift", "start", "--for", "10m", "--spend")
            assert "spending the agents' windows past the headroom kept" in out
            assert "spending past the headroom kept" in d.ok("status")
            assert d.wait_job(later, "review", timeout=120)["runs"][0]["outcome"] == "succeeded"
