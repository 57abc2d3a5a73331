"""A Job a verb holds while its git runs (drop, accept, verify: see owl.verbs.caller_side)
is neither started nor changed by another verb meanwhile, and every verb says
so in words. The real engine, a real project, a real SQLite file."""

from __future__ import annotations

import pytest

import subprocess
import time

from owl.verbs import caller_side as verbwork
from owl.verbs.engine_side import Verbs
from owl.errors import Refused
from owlproc import OWL, OwlDaemon, make_project, wait_for
from support.slowgit import SlowGit
from test_setup import sleepers
from test_engine_sleep import engine_in


def test_a_held_job_is_not_started_nor_changed_and_says_why(tmp_path):
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        prep = verbwork.prepare_add(e.cfg, "sleep=1", str(make_project(tmp_path / "p")), None)
        job = e.call(lambda: Verbs(e).add_prepared(prep, None))["id"]
        e.call(lambda: Verbs(e).hold(job, "being dropped"))
        decision = e.call(lambda: e.decide(asked=True))
        assert decision.job is None
        for verb in (
            lambda: Verbs(e).move(job, 1),
            lambda: Verbs(e).extend(job, 1),
            lambda: Verbs(e).drop_begin(job, True),
            lambda: Verbs(e).accept_begin(job),
        ):
            with pytest.raises(
                Refused, match=f"^job {job} is being dropped; try again in a moment$"
            ):
                e.call(verb)
        e.call(lambda: Verbs(e).release(job))
        assert e.call(lambda: e.decide(asked=True)).job.id == job
    finally:
        assert e.stop(10)


def test_a_refused_drop_lets_go_of_its_hold(tmp_path):
    """drop's git finds work nobody kept and refuses: the Job is free again."""
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        project = make_project(tmp_path / "p")
        prep = verbwork.prepare_add(e.cfg, "write=a.txt commit=work", str(project), None)
        job = e.call(lambda: Verbs(e).add_prepared(prep, None))["id"]
        e.call(lambda: e.machine_event("idle"))
        wait_for(
            lambda: e.call(lambda: e.store.job(job))["state"] == "review",
            timeout=30,
            what="the Job in review",
        )
        with pytest.raises(Refused, match=r"\(use --force to"):
            verbwork.drop(e, job, False)
        assert e.call(lambda: dict(e.held)) == {}
        assert verbwork.drop(e, job, True)["state"] == "cancelled"
    finally:
        assert e.stop(10)


def test_a_drop_whose_git_hangs_holds_up_nothing_but_its_job(tmp_path):
    """drop's check for unkept work waits on a slow `git status` (a large
    checkout): a live Run still freezes at once, and the dropped Job, held,
    says why it cannot be changed; once git answers, the drop says what it
    found, and the Job is free again."""
    slow = SlowGit(tmp_path / "bin")
    project = make_project(tmp_path / "proj")
    with OwlDaemon(
        tmp_path / "home", {"runs": {"max_parallel": 2}}, env={"PATH": slow.path()}
    ) as d:
        done = d.add("write=a.txt commit=work exit=0", project)
        d.machine("idle")
        d.wait_job(done, "review")
        live = d.add("tick=0.2 sleep=120", project)
        d.wait_run(live, "running")
        slow.slow(60, on="status")
        drop = subprocess.Popen(
            [*OWL, "jobs", "drop", str(done)],
            env=d.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: sleepers(slow.folder), what="drop's git to hang")
            t = time.monotonic()
            d.machine("input")
            d.wait_run(live, "frozen", timeout=2)
            assert time.monotonic() - t < 1.5
            p = d.owl("jobs", "reply", str(done), "--", "more")
            assert p.returncode == 1
            assert p.stderr.strip() == f"owl: job {done} is being dropped; try again in a moment"
            assert d.status()["paused"] is False  # every other verb answers
            slow.slow(None)
            for s in sleepers(slow.folder):
                s.kill()  # git answers now
            out, err = drop.communicate(timeout=30)
        finally:
            drop.kill()
        assert drop.returncode == 1 and "(use --force to" in err, err
        assert d.job(done)["state"] == "review"
        assert d.ok("jobs", "drop", str(done), "--force").startswith(f"job {done} dropped")
