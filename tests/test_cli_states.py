"""Every verb in every state it meets: daemon running or not; paused or not; a
Run live or not; a Shift on or not. Exit codes are the README's: 0 done (also
when the goal already held, and then the answer says so); 1 refused; 2 usage;
3 no daemon. With --json an error is a JSON object on stdout, same exit code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from owlproc import OWL, OwlDaemon, make_project

Step = tuple[tuple[str, ...], int, str]  # argv, exit code, words in stdout+stderr


def walk(run, steps: list[Step]) -> None:
    for args, code, words in steps:
        p = run(*args)
        said = p.stdout + p.stderr
        assert p.returncode == code, (args, p.returncode, said)
        assert words in said, (args, words, said)
        reads = (
            args[0] == "status" or args[:1] == ("jobs",) and args[1:2] in ((), ("list",), ("show",))
        )
        if code == 3 and reads:  # answered from the database, then exit 3
            j = run(*args, "--json")
            assert j.returncode == 3 and "error" not in json.loads(j.stdout), args
        elif code != 0 and "--json" not in args:
            j = run(*args, "--json")
            assert j.returncode == code, (args, j.returncode)
            doc = json.loads(j.stdout)
            if isinstance(doc, list):  # several ids: one answer each, errors as objects
                doc = next(x for x in doc if "error" in x)
            assert doc["exit"] == code and doc["error"], (args, doc)


def test_no_daemon(tmp_path: Path) -> None:
    home, project = tmp_path / "home", make_project(tmp_path / "proj")
    with OwlDaemon(home) as d:
        job = d.add("exit=0", project)
        d.machine("idle")
        d.wait_job(job, "review")
    env = dict(os.environ, OWL_HOME=str(home), OWL_NO_AUTOSTART="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*OWL, *args], env=env, capture_output=True, text=True, timeout=30)

    nd = "no Owl daemon is running"
    walk(
        run,
        [
            (("status",), 3, "no daemon is running · 0 jobs queued · 1 review"),
            (("jobs",), 3, nd),
            (("jobs", "list", "--all"), 3, "review"),
            (("jobs", "show", str(job)), 3, f"job {job} · review"),
            (("logs", str(job)), 0, f"job {job} · run 1 · attempt 1 · succeeded"),
            (("add", "--project", str(project), "more"), 0, "queued for the next one"),
            (("start",), 3, nd),
            (("pause",), 3, nd),
            (("resume",), 3, nd),
            (("stop",), 3, nd),
            (("stop", "--after-grace"), 3, nd),
            (("shift", "start"), 3, nd),
            (("shift", "stop"), 3, nd),
            (("shift", "status"), 3, nd),
            (("jobs", "accept", str(job)), 3, nd),
            (("jobs", "drop", str(job)), 3, nd),
            (("jobs", "show", "99"), 1, "no job 99"),
            (("config", "path"), 0, str(home / "config.toml")),
            (("config", "check"), 0, "ok"),
            (("autostart", "status"), 0, "off"),
            (("jobs", "list", "7"), 2, "does not take '7'"),
            (("pause", "now"), 2, "does not take 'now'"),
        ],
    )


def test_with_a_daemon_every_state(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "60s"}}) as d:
        run = d.owl
        d.machine("input")
        walk(
            run,
            [  # nothing queued, nothing live
                (("status",), 0, "runs:       none live"),
                (("jobs",), 0, "no jobs"),
                (("start",), 1, "no Job is waiting to start"),
                (("stop",), 0, "nothing to stop: no Run is live"),
                (("resume",), 0, "already running: not paused"),
                (("shift", "stop"), 0, "no Shift is on"),
                (("shift", "status"), 0, "no Shift"),
                (("pause",), 0, "paused; nothing was running"),  # paused, nothing live
                (("pause",), 0, "already paused"),
                (("status",), 0, "paused:     yes"),
                (("stop",), 0, "nothing to stop"),
                (("resume",), 0, "resumed"),
                (("resume",), 0, "already running"),
            ],
        )
        a = d.add("tick=0.2 sleep=60", project)
        b = d.add("sleep=60", project)
        walk(
            run,
            [
                (("jobs",), 0, f"{a}    1  pending"),
                (("jobs", "move", str(b), "1"), 0, f"job {b}"),
                (("jobs", "move", str(b), "9"), 1, "outside the queue (1 to 2)"),
                (("jobs", "accept", str(a)), 1, "not in review"),
                (("start",), 0, f"job {b}"),  # started, or being set up: a Run live soon
            ],
        )
        d.wait_run(b, "running")
        walk(
            run,
            [
                (("start",), 1, "cap"),
                (("status",), 0, f"job {b} · running"),
                (("jobs", "drop", str(b)), 1, "has a Run going"),
                (("pause",), 0, "paused; 1 Run frozen"),  # paused with a Run live
                (("pause",), 0, "already paused"),
                (("resume",), 0, "resumed"),
                (("stop",), 0, "stopping 1 Run now"),  # ends now, not after 60 s
            ],
        )
        j = d.wait_job(b, "pending", timeout=10)
        assert j["runs"][-1]["ended_by"] in ("sigterm", "sigkill")
        assert d.status()["runs"] == []
        walk(
            run,
            [
                (("stop",), 0, "nothing to stop"),
                (("jobs", "drop", str(a), str(b), "999"), 1, "no job 999"),  # each said
                (("jobs", "drop", str(a)), 0, f"job {a} was already dropped"),
                (("shift", "start", "--for", "10m"), 0, "Shift started"),  # a Shift on
                (("shift", "start", "--for", "5m"), 0, "Shift extended"),
                (("shift", "status"), 0, "Shift on · 10m left"),
                (("shift", "start", "--for", "soon"), 2, "not a duration"),
                (("shift", "stop"), 0, "Shift ended"),
                (("shift", "stop"), 0, "no Shift is on"),
            ],
        )
        p = run("jobs", "drop", str(a), "--json", str(b))  # options anywhere
        assert p.returncode == 0 and [x["id"] for x in json.loads(p.stdout)] == [a, b]
        p = run("jobs", "drop", str(a), str(b))
        assert p.returncode == 0 and p.stdout.splitlines() == [
            f"job {a} was already dropped",
            f"job {b} was already dropped",
        ]
        assert d.status()["queue_length"] == 0
