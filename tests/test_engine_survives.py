"""Nothing a Run's output holds can stop the engine.

Through the real daemon: a command agent whose limit words say "try again in
3000000 days" and a stand-in claude whose stream says `resetsAt` 1e18 (both
once took the engine down, and took it down again at every restart) each end
with a bounded backoff, the log says what was read, and the daemon keeps
answering. A wait stored before the bound held ("until 2054") is cut to
limits.max_wait at the next start. And on the real engine in-process: a
judging that fails ends that Run failed, saying so, and blocks its Job the
second time, while the engine goes on.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from owl.engine import carryon
from owl.engine import runend
from owl.store.db import Store
from owl.verbs import caller_side as verbwork
from owl.verbs import looking
from owl.verbs.engine_side import Verbs
from owlproc import OwlDaemon, make_project, wait_for
from test_engine_sleep import engine_in

SID = "73478951-e771-47a1-9513-56f941dedf25"
FAR_WORDS = "usage limit, try again in 3000000 days"


def stand_in_claude(folder: Path, lines: list[dict]) -> Path:
    """An executable that prints `lines` as claude's stream-json and exits 1."""
    path = folder / "claude"
    path.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write({''.join(json.dumps(x) + chr(10) for x in lines)!r})\n"
        "sys.exit(1)\n"
    )
    path.chmod(0o755)
    return path


def limit_stream(resets_at: float) -> list[dict]:
    return [
        {"type": "system", "subtype": "init", "session_id": SID},
        {
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": "rejected",
                "resetsAt": resets_at,
                "rateLimitType": "five_hour",
            },
        },
        {
            "type": "assistant",
            "error": "rate_limit",
            "api_error": "usage_limit_reached",
            "message": {"content": [{"type": "text", "text": "You've hit your limit"}]},
        },
        {
            "type": "result",
            "is_error": True,
            "session_id": SID,
            "num_turns": 1,
            "result": "You've hit your limit",
        },
    ]


def test_far_reset_moments_back_off_and_the_daemon_keeps_answering(tmp_path):
    project = make_project(tmp_path / "proj")
    claude = stand_in_claude(tmp_path, limit_stream(1e18))
    cfg = {
        "agents": {
            "claude": {"path": str(claude)},
            "far": {
                "command": [sys.executable, "-c", f"print({FAR_WORDS!r}); raise SystemExit(1)"],
                "limit_pattern": "usage limit",
            },
        }
    }
    with OwlDaemon(tmp_path / "owl", cfg) as d:
        far = d.add("anything", project, "--agent", "far")
        cl = d.add("anything", project, "--agent", "claude")
        d.machine("idle")
        began = time.time()
        for job in (far, cl):
            wait_for(
                lambda: (r := d.job(job)["runs"]) and r[0]["ended_at"],
                timeout=20,
                what=f"job {job}'s Run to end",
            )
        runs = {job: d.job(job)["runs"][0] for job in (far, cl)}
        assert {r["outcome"] for r in runs.values()} == {"interrupted"}
        assert runs[far]["reason"].startswith(
            "far's usage limit; the reset it gave, \"try "
            'again in 3000000 days", is more than 8 days away'
        )
        assert runs[cl]["reason"].startswith(
            "Claude's 5-hour usage limit; the reset it gave, "
            '"resetsAt 1e+18", is more than 8 days away'
        )
        st = d.status()
        waits = {w["agent"]: w for w in st["limits"]}
        assert set(waits) == {"far", "claude"}
        for w in waits.values():  # the backoff: five minutes, not a century
            assert 290 <= w["until_epoch"] - began <= 310 + (time.time() - began)
        log = d.log_text()
        assert "engine failed" not in log
        assert 'reset moment is not used ("try again in 3000000 days"' in log
        assert 'reset moment is not used ("resetsAt 1e+18"' in log
        assert d.owl("status").returncode == 0 and d.owl("jobs").returncode == 0
    # A wait stored before the bound held: cut to limits.max_wait at the next start.
    store = Store(tmp_path / "owl" / "owl.db")
    store.set_limit("far", "usage", time.time() + 9999 * 86400, "far's usage limit", 0)
    store.close()
    with OwlDaemon(tmp_path / "owl", {**cfg, "limits": {"max_wait": "2h"}}) as d:
        [w] = [w for w in d.status()["limits"] if w["agent"] == "far"]
        assert w["left_s"] <= 2 * 3600
        assert "longer than limits.max_wait" in d.log_text()


def test_a_run_whose_end_cannot_be_judged_fails_and_twice_blocks_its_job(tmp_path, monkeypatch):
    def broken(*a, **kw):
        raise ValueError("year 10240 is out of range")

    monkeypatch.setattr(carryon, "conclude", broken)
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        prep = verbwork.prepare_add(e.cfg, "exit=1", str(make_project(tmp_path / "p")), None)
        job = e.call(lambda: Verbs(e).add_prepared(prep, 3))["id"]
        e.call(lambda: e.machine_event("idle"))
        view = wait_for(
            lambda: (v := e.call(lambda: looking.job_view(e, job)))["state"] == "blocked" and v,
            timeout=30,
            what="the Job blocked",
        )
        reasons = [r["reason"] for r in view["runs"]]
        assert reasons == [f"{runend.UNREAD}: ValueError: year 10240 is out of range"] * 2
        assert [r["outcome"] for r in view["runs"]] == ["failed", "failed"]
        assert view["reason"].startswith("Owl could not read the end of two of its Runs")
        assert not e.stopped and e.call(lambda: looking.status(e))["runs"] == []
    finally:
        assert e.stop(10)
