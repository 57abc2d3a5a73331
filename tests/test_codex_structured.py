"""Codex's usage limit read from its structured facts first, with the REAL CLI.

`codex exec --json` words a usage limit ("You've hit your usage limit. ... try
again at 1:18 AM."), but the thread's rollout keeps the facts: the failed
turn's `codex_error_info: "usage_limit_exceeded"` and the plan's rate-limit
snapshot from the 429's `x-codex-primary-*` headers (`used_percent` 100,
`resets_at`). The stub answers with a snapshot that resets at another moment
than the words say: the wait is the snapshot's, to the second.

Without the CLI these tests fail (tools/install-agents.sh installs it).
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from owlproc import make_project

from support import responses_stub
from test_codex_gemini import agent_daemon, first_ended

pytestmark = pytest.mark.agent_clis


def test_the_wait_is_the_exhausted_windows_reset_from_the_rollout(tmp_path):
    project = make_project(tmp_path / "proj")
    reset = int(time.time()) + 1800  # the words will say about an hour
    week = reset + 86400
    turn = dataclasses.replace(
        responses_stub.UsageLimit(3600),
        headers=responses_stub.Windows((100, 300, reset), (40, 10080, week)),
    )
    with responses_stub.ResponsesStub([turn]) as stub, agent_daemon(tmp_path, "codex", stub) as d:
        job = d.add("Say done.", project, "--agent", "codex", "--attempts", "1")
        d.machine("idle")
        j = first_ended(d, job)
        first = j["runs"][0]
        assert first["outcome"] == "interrupted", first
        assert first["reason"].startswith("codex's usage limit; resets "), first["reason"]
        assert j["attempts_left"] == 1
        [w] = d.status()["limits"]
        assert (w["agent"], w["until_epoch"]) == ("codex", reset)
        assert len(stub.turns()) == 1


def test_codex_error_info_decides_before_the_words():
    from owl.agents.codex_stream import with_info
    from owl.rules.budget import FIVE_HOUR, SEVEN_DAY, Reading
    from owl.rules.jobrules import Report

    now = time.time()
    windows = [Reading(FIVE_HOUR, 1.0, now + 600, now), Reading(SEVEN_DAY, 0.4, now + 9e4, now)]
    words = Report(limit=None, service_error="connection error")
    got = with_info(words, ("usage_limit_exceeded", None), windows)
    assert (got.limit, got.resets_at, got.service_error) == ("usage", now + 600, None)
    # no exhausted window: the limit all the same, the words' reset kept
    kept = with_info(Report(limit="usage", resets_at=now + 60), ("usage_limit_exceeded", None), [])
    assert (kept.limit, kept.resets_at) == ("usage", now + 60)
    assert with_info(Report(), ("http_connection_failed", 503), []).service_error == "HTTP 503"
    assert with_info(Report(), ("server_overloaded", None), []).service_error == "server overloaded"
    assert with_info(Report(), ("context_window_exceeded", None), []) == Report()
    assert (
        with_info(Report(resume_failed="x"), ("usage_limit_exceeded", None), windows).limit is None
    )


def test_the_rollouts_error_info_is_read_as_data(tmp_path):
    from owl.agents import codex_rollout

    thread = "01a24ddd-6d9a-7431-a74a-ea398f3c945f"
    day = tmp_path / "sessions" / "2026" / "12" / "07"
    day.mkdir(parents=True)
    lines = [
        '{"type":"event_msg","payload":{"type":"task_complete","error":{"message":"m",'
        '"codex_error_info":{"http_connection_failed":{"http_status_code":502}}}}}',
        "not json",
    ]
    (day / f"rollout-2026-12-07T00-18-06-{thread}.jsonl").write_text("\n".join(lines))
    assert codex_rollout.error_info(tmp_path, thread) == ("http_connection_failed", 502)
    assert codex_rollout.error_info(tmp_path, "../../etc") is None
