"""A Job a verb holds while its git runs (drop, accept, verify: see owl.verbwork)
is neither started nor changed by another verb meanwhile, and every verb says
so in words. The real engine, a real project, a real SQLite file."""

from __future__ import annotations

import pytest

from owl import verbwork
from owl.errors import Refused
from owlproc import make_project, wait_for
from test_engine_sleep import engine_in


def test_a_held_job_is_not_started_nor_changed_and_says_why(tmp_path):
    e = engine_in(tmp_path, grace=60.0)
    e.start()
    try:
        prep = verbwork.prepare_add(e.cfg, "sleep=1", str(make_project(tmp_path / "p")), None)
        job = e.call(lambda: e.verbs.add_prepared(prep, None))["id"]
        e.call(lambda: e.verbs.hold(job, "being dropped"))
        decision = e.call(lambda: e.decide(asked=True))
        assert decision.job is None
        for verb in (lambda: e.verbs.move(job, 1), lambda: e.verbs.extend(job, 1),
                     lambda: e.verbs.drop_begin(job, True),
                     lambda: e.verbs.accept_begin(job)):
            with pytest.raises(Refused, match=f"^job {job} is being dropped; try again in a "
                                              "moment$"):
                e.call(verb)
        e.call(lambda: e.verbs.release(job))
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
        job = e.call(lambda: e.verbs.add_prepared(prep, None))["id"]
        e.call(lambda: e.machine_event("idle"))
        wait_for(lambda: e.call(lambda: e.store.job(job))["state"] == "review", timeout=30,
                 what="the Job in review")
        with pytest.raises(Refused, match=r"\(use --force to"):
            verbwork.drop(e, job, False)
        assert e.call(lambda: dict(e.held)) == {}
        assert verbwork.drop(e, job, True)["state"] == "cancelled"
    finally:
        assert e.stop(10)
