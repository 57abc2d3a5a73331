"""An agent's usage-limit wait: `owl start` and `owl jobs reply` say which wait
holds a Job and the command that ends it, `owl status` dates a far moment with
its year, and `owl agents wake NAME` ends the wait. Through the real daemon,
with a command agent whose output says its limit resets in seven days."""

from __future__ import annotations

import sys
import time

from owlproc import OwlDaemon, make_project, wait_for

# Limited (and marks it) while the mark is absent; succeeds once it is there.
AGENT = (
    "import os, sys\n"
    "mark = sys.argv[1]\n"
    "if os.path.exists(mark):\n"
    "    raise SystemExit(0)\n"
    "open(mark, 'w').close()\n"
    "print('You have hit your usage limit; try again in 7 days')\n"
    "raise SystemExit(1)\n"
)


def test_a_wait_is_named_with_its_command_and_wake_ends_it(tmp_path):
    project = make_project(tmp_path / "proj")
    mark = tmp_path / "limited"
    cfg = {
        "agents": {
            "lim": {
                "command": [sys.executable, "-c", AGENT, str(mark)],
                "limit_pattern": "usage limit",
            }
        },
        "agent": {"default": "lim"},
    }
    with OwlDaemon(tmp_path / "owl", cfg) as d:
        a = d.add("anything", project)
        d.ok("start")
        wait_for(lambda: (r := d.job(a)["runs"]) and r[0]["ended_at"], what="the limited Run")
        [w] = d.status()["limits"]
        assert 7 * 86400 - 60 < w["left_s"] <= 7 * 86400
        year = time.localtime(w["until_epoch"]).tm_year
        assert f"lim waits until {time.strftime('%b', time.localtime(w['until_epoch']))}" in d.ok(
            "status"
        ) and f" {year} " in d.ok("status")
        p = d.owl("start")
        assert p.returncode == 1
        assert f"job {a}'s agent lim waits until" in p.stderr
        assert "`owl agents wake lim` ends that wait" in p.stderr
        assert p.stderr.count("\n") == 1
        # wake: the Job starts again at once
        assert "lim no longer waits" in d.ok("agents", "wake", "lim")
        assert d.status()["limits"] == []
        d.ok("start")
        d.wait_job(a, "review")
        assert "lim is not waiting" in d.ok("agents", "wake", "lim")
        p = d.owl("agents", "wake", "nobody")
        assert p.returncode == 1 and "no agent 'nobody' (known: claude, lim, script)" in p.stderr
        # another Job meets the limit; a reply to the first says it waits behind it
        mark.unlink()
        b = d.add("anything", project)
        d.ok("start")
        wait_for(lambda: (r := d.job(b)["runs"]) and r[0]["ended_at"], what="b's limited Run")
        out = d.ok("jobs", "reply", str(a), "also the empty case")
        assert (
            "its next Run is given your reply; it starts once that agent may run: lim waits until"
            in out
            and "`owl agents wake lim` ends that wait" in out
        )
