"""The `owl` command as a person and a script use it: the real executable, the real daemon.

Exit codes are the interface: 0 done; 1 refused, with exactly one line on
stderr saying why; 2 usage; 3 no daemon (read verbs answer from the database
first). Git effects of accept and drop are checked in the project itself.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from owl import __version__
from owlproc import OWL, OwlDaemon, make_project, process_states, wait_for


def run_owl(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual")
    return subprocess.run(
        [*OWL, *args], env=env, capture_output=True, text=True, input=input, timeout=30
    )


def refused(p: subprocess.CompletedProcess, words: str) -> None:
    """Exit 1, nothing on stdout, one line on stderr that says `words`."""
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("owl: "), p.stderr
    assert words in p.stderr, p.stderr


def git(project: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(project), *args], capture_output=True, text=True, check=True
    ).stdout


def branches(project: Path) -> list[str]:
    return git(project, "branch", "--format=%(refname:short)").split()


def worktrees(project: Path) -> list[str]:
    return [
        line.split(" ", 1)[1]
        for line in git(project, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    """One daemon for the refusals: they must leave it as they found it."""
    root = tmp_path_factory.mktemp("cli")
    project = make_project(root / "proj")
    with OwlDaemon(root / "home") as d:
        d.project = project  # type: ignore[attr-defined]
        d.plain = root / "plain"  # type: ignore[attr-defined]
        d.plain.mkdir()
        yield d


# ------------------------------------------------------------- no daemon needed


def test_version(tmp_path):
    p = run_owl(tmp_path, "--version")
    assert p.returncode == 0 and p.stdout.strip() == f"owl {__version__}"


HELP = {
    "add": "Queue a Job",
    "jobs": "another place in the queue",
    "start": "Start one Run now",
    "pause": "Freeze every live Run",
    "resume": "Lift the hold",
    "stop": "this work, not work",
    "shift": "A Shift is a bounded time",
    "status": "at a glance",
    "logs": "until the Run ends",
    "config": "the config in force",
    "autostart": "start Owl at login",
    "daemon": "without a tray",
    "tray": "tray icon",
}


@pytest.mark.parametrize("verb, words", sorted(HELP.items()))
def test_every_verb_says_what_it_does(tmp_path, verb, words):
    p = run_owl(tmp_path, verb, "--help")
    assert p.returncode == 0, p.stderr
    assert words in " ".join(p.stdout.split()), p.stdout
    top = run_owl(tmp_path, "--help")
    assert verb in top.stdout


def test_stop_during_a_shift_stops_this_work_not_the_shift(tmp_path):
    text = " ".join(run_owl(tmp_path, "stop", "--help").stdout.split())
    assert "Shift" in text and "owl shift stop" in text


@pytest.mark.parametrize(
    "args",
    [
        ("bogus",),
        ("jobs", "show"),
        ("jobs", "show", "x"),
        ("jobs", "move", "1"),
        ("jobs", "frobnicate", "1"),
        ("add",),
        ("add", "--attempts", "many", "p"),
        ("shift", "start", "--for", "soon"),
        ("shift",),
        ("logs",),
        ("logs", "x"),
        ("config", "edit"),
        ("status", "--yaml"),
        ("machine", "dance"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args):
    p = run_owl(tmp_path, *args)
    assert p.returncode == 2, (args, p.stdout, p.stderr)
    assert p.stdout == "" and "owl:" in p.stderr and "Traceback" not in p.stderr


def test_config_path_show_check_and_a_broken_config(tmp_path):
    home = tmp_path / "home"
    p = run_owl(home, "config", "path")
    assert p.returncode == 0 and p.stdout.strip() == str(home / "config.toml")
    assert json.loads(run_owl(home, "config", "path", "--json").stdout) == {
        "path": str(home / "config.toml"),
        "exists": False,
    }
    p = run_owl(home, "config", "check")
    assert p.returncode == 0 and "defaults in force" in p.stdout
    doc = json.loads(run_owl(home, "config", "show", "--json").stdout)
    assert doc["idle"]["after"] == "10m" and doc["interruption"]["grace_window"] == "15m"
    assert doc["runs"]["max_parallel"] == 1 and doc["agent"]["default"] == "claude"
    # Linux's default: a Run that cannot be contained waits (see test_sandbox_required)
    assert doc["sandbox"]["mode"] == ("required" if sys.platform == "linux" else "auto")
    assert doc["sandbox"]["network"] is True and doc["sandbox"]["read"] == []

    home.mkdir()
    cfg = home / "config.toml"
    cfg.write_text('[idle]\nafter = "2m"\n[runs]\nnice = 5\n')
    p = run_owl(home, "config", "check")
    assert p.returncode == 0 and p.stdout.strip() == f"{cfg}: ok"
    assert 'after = "2m"' in run_owl(home, "config", "show").stdout

    for text, key, value in [
        ('[idle]\nafter = "soon"\n', "idle.after", '"soon"'),
        ("[runs]\nmax_parallel = 0\n", "runs.max_parallel", "0"),
        ("[interruption]\ngrace_window = -5\n", "interruption.grace_window", "-5"),
    ]:
        cfg.write_text(text)
        for verb in ("check", "show"):
            p = run_owl(home, "config", verb)
            refused(p, str(cfg))
            assert key in p.stderr and value in p.stderr, p.stderr
    cfg.write_text("[idle\nafter=1")
    refused(run_owl(home, "config", "check"), "not valid TOML")


def test_with_no_daemon_reads_answer_from_the_database_and_the_rest_exit_3(tmp_path):
    home, project = tmp_path / "home", make_project(tmp_path / "proj")
    p = run_owl(home, "status")
    assert p.returncode == 3 and "0 jobs queued" in p.stdout
    assert p.stderr.strip() == "owl: no Owl daemon is running (start one with: owl daemon --detach)"
    with OwlDaemon(home) as d:
        done = d.add("write=a.txt commit=first exit=0", project)
        d.machine("idle")
        d.wait_job(done, "review")
        d.machine("input")
        waiting = d.add("sleep=60", project)
        d.ok("pause")
        run_id = d.job(done)["runs"][0]["id"]
    # the daemon is gone now
    p = run_owl(home, "status")
    assert p.returncode == 3
    assert "1 job queued" in p.stdout and "1 review" in p.stdout and "paused" in p.stdout
    assert f"job {waiting}" in p.stdout
    st = json.loads(run_owl(home, "status", "--json").stdout)
    assert st["daemon"] is False and st["queue_length"] == 1 and st["paused"] is True
    assert st["jobs"] == {"review": 1, "pending": 1} and st["head"] == waiting
    for verb in (
        ("pause",),
        ("resume",),
        ("start",),
        ("stop",),
        ("jobs", "drop", str(waiting)),
        ("shift", "status"),
    ):
        p = run_owl(home, *verb)
        assert p.returncode == 3, (verb, p.stderr)
        assert (
            p.stderr.strip()
            == "owl: no Owl daemon is running (start one with: owl daemon --detach)"
        )
    p = run_owl(home, "jobs", "list", "--json")
    assert p.returncode == 3 and "no Owl daemon" in p.stderr  # answered, then exit 3
    listed = json.loads(p.stdout)
    assert [(j["id"], j["state"], j["position"]) for j in listed] == [
        (waiting, "pending", 1),
        (done, "review", None),
    ]  # the queue first
    p = run_owl(home, "jobs")
    assert p.returncode == 3 and p.stdout.split()[:7] == [
        "ID",
        "POS",
        "STATE",
        "AGENT",
        "PROJECT",
        "AGE",
        "TITLE",
    ]
    rows = [line.split() for line in p.stdout.splitlines()[1:]]
    assert [r[:5] for r in rows] == [
        [str(waiting), "1", "pending", "script", "proj"],
        [str(done), "-", "review", "script", "proj"],
    ]
    p = run_owl(home, "jobs", "show", str(done), "--json")
    assert p.returncode == 3
    shown = json.loads(p.stdout)
    assert shown["state"] == "review" and shown["runs"][0]["outcome"] == "succeeded"
    refused(run_owl(home, "jobs", "show", "999"), "no job 999")
    p = run_owl(home, "logs", str(done))
    assert p.returncode == 0 and p.stdout and f"run {run_id}" in p.stdout  # no daemon needed
    # `owl add` told not to start a daemon queues the Job for the next one
    p = run_owl(home, "add", "--project", str(project), "x")
    assert p.returncode == 0 and p.stdout.strip() == str(waiting + 1), p.stderr
    assert "queued for the next one" in p.stderr


# ------------------------------------------------------------------ refusals


def test_refusals_are_one_line_and_change_nothing(daemon):
    project, plain = str(daemon.project), str(daemon.plain)
    first = daemon.add("sleep=60", daemon.project)
    before = daemon.json("jobs", "list")
    cases = [
        (("jobs", "show", "999"), "no job 999"),
        (("jobs", "drop", "999"), "no job 999"),
        (("jobs", "accept", "999"), "no job 999"),
        (("jobs", "extend", "999"), "no job 999"),
        (("jobs", "move", "999", "1"), "no job 999"),
        (("jobs", "verify", "999"), "no job 999"),
        (("jobs", "move", str(first), "2"), "outside the queue (1 to 1)"),
        (("jobs", "accept", str(first)), "not in review"),
        (("logs", "999"), "no job 999"),
        (("logs", "--run", "999"), "no run 999"),
        (("add", "--project", project, ""), "the prompt is empty"),
        (("add", "--project", project, " \n\t "), "the prompt is empty"),
        (("add", "--project", plain, "do it"), "is not a git repository"),
        (("add", "--project", plain + "/nope", "do it"), "does not exist"),
        (("add", "--project", project, "--agent", "nobody", "do it"), "nobody"),
    ]
    for args, words in cases:
        refused(daemon.owl(*args), words)
    # 0 is no id, position or count, as abc is not: the same words, as usage (exit 2)
    for args in (
        ("jobs", "show", "0"),
        ("jobs", "show", "abc"),
        ("jobs", "move", str(first), "0"),
        ("add", "--project", project, "--attempts", "0", "do it"),
    ):
        p = daemon.owl(*args)
        assert p.returncode == 2 and p.stdout == "", (args, p)
        assert p.stderr.splitlines()[-1].endswith(
            "is not a whole number of 1 or more written with the digits 0-9"
        ), p.stderr
    # a prompt of 1 MB: the daemon's limit; of 2 MB: more than a request may carry
    refused(
        daemon.owl("add", "--project", project, "-", input="x" * 1_000_000),
        "the prompt is 1,000,000 bytes; the limit is 100,000",
    )
    refused(
        daemon.owl("add", "--project", project, "-", input="x" * 2_000_000),
        "the daemon reads at most 1,048,576",
    )
    assert daemon.json("jobs", "list") == before
    daemon.ok("jobs", "drop", str(first))


def test_pause_with_nothing_running_sets_the_hold_and_says_so(daemon):
    p = daemon.owl("pause")
    assert p.returncode == 0 and "nothing was running" in p.stdout
    assert daemon.status()["paused"] is True
    assert "paused:     yes" in daemon.ok("status")
    again = daemon.owl("pause")
    assert again.returncode == 0 and "already paused" in again.stdout, again
    assert daemon.json("resume")["paused"] is False
    assert daemon.status()["paused"] is False


def test_add_json_is_the_job_as_jobs_show_gives_it_and_stdin_works(daemon):
    p = daemon.owl(
        "add",
        "--json",
        "--project",
        str(daemon.project),
        "--attempts",
        "2",
        "-",
        input="sleep=60\nsecond line of the prompt\n",
    )
    assert p.returncode == 0, p.stderr
    added = json.loads(p.stdout)
    assert added == daemon.job(added["id"])
    assert added["prompt"] == "sleep=60\nsecond line of the prompt\n"
    assert added["attempts_left"] == 2 and added["state"] == "pending" and added["runs"] == []
    assert {"id", "state", "position", "branch", "worktree", "attempts_left", "runs"} <= set(added)
    plain = daemon.ok("add", "--project", str(daemon.project), "sleep=60").strip()
    assert plain.isdigit() and int(plain) == added["id"] + 1
    for j in (added["id"], int(plain)):
        daemon.ok("jobs", "drop", str(j))


def test_every_word_after_a_double_dash_is_the_prompt(daemon):
    for args, prompt in (
        (("--", "--json", "-x", "--", "--help"), "--json -x -- --help"),
        (("fix", "--agent", "script", "the", "--", "-rf", "/"), "fix the -rf /"),
    ):
        p = daemon.owl("add", "--project", str(daemon.project), *args)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        job = daemon.job(int(p.stdout))
        assert job["prompt"] == prompt
        daemon.ok("jobs", "drop", str(job["id"]))
    p = daemon.owl("add", "--project", str(daemon.project), "--", "-", input="-n\n")
    assert p.returncode == 0, p.stderr
    assert daemon.job(int(p.stdout))["prompt"] == "-n\n"
    daemon.ok("jobs", "drop", p.stdout.strip())
    p = daemon.owl("add", "--project", str(daemon.project), "--")
    assert p.returncode == 2 and "PROMPT" in p.stderr
    # an option moved from before the verb stays an option, ahead of the `--`
    p = daemon.owl("--json", "add", "--project", str(daemon.project), "--", "-x")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["prompt"] == "-x"
    daemon.ok("jobs", "drop", str(json.loads(p.stdout)["id"]))


def test_move_reorders_the_queue(daemon):
    ids = [daemon.add(f"sleep=60 n{i}", daemon.project) for i in range(4)]
    moved = daemon.json("jobs", "move", str(ids[3]), "1")
    assert moved["id"] == ids[3] and moved["position"] == 1
    order = [j["id"] for j in daemon.json("jobs", "list") if j["position"]]
    assert order == [ids[3], ids[0], ids[1], ids[2]]
    p = daemon.owl("jobs", "move", str(ids[0]), "4")
    assert p.returncode == 0 and f"job {ids[0]}" in p.stdout and "position 4" in p.stdout
    order = [j["id"] for j in daemon.json("jobs", "list") if j["position"]]
    assert order == [ids[3], ids[1], ids[2], ids[0]]
    refused(daemon.owl("jobs", "move", str(ids[0]), "5"), "outside the queue (1 to 4)")
    st = daemon.status()
    assert [(q["id"], q["position"], q["state"]) for q in st["queue"]] == [
        (ids[3], 1, "pending"),
        (ids[1], 2, "pending"),
        (ids[2], 3, "pending"),
        (ids[0], 4, "pending"),
    ]
    for j in ids:
        daemon.ok("jobs", "drop", str(j))


# --------------------------------------------------------- with real Runs


def test_accept_drop_extend_and_the_git_they_leave(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        a = d.add("write=a.txt commit=one exit=0", project)
        b = d.add("write=b.txt commit=two exit=0", project)
        c = d.add("exit=3", project, "--attempts", "1")
        d.machine("idle")
        d.wait_job(c, "exhausted")
        ja, jb = d.job(a), d.job(b)
        assert ja["state"] == jb["state"] == "review"
        assert Path(ja["worktree"]).is_dir() and ja["branch"] == f"owl/job-{a}"
        assert {ja["branch"], jb["branch"]} <= set(branches(project))

        # accept: the branch stays with its commit, the worktree goes
        out = d.json("jobs", "accept", str(a))
        assert out["state"] == "done" and out["branch"] == ja["branch"]
        assert ja["branch"] in branches(project)
        assert "one" in git(project, "log", "--format=%s", ja["branch"])
        assert not Path(ja["worktree"]).exists() and ja["worktree"] not in worktrees(project)
        assert d.job(a)["state"] == "done" and d.job(a)["worktree"] is None
        again = d.owl("jobs", "accept", str(a))
        assert again.returncode == 0 and "already accepted" in again.stdout, again

        # drop: a branch with commits of its own needs --force (before or after the id);
        # then the branch and the worktree both go, the tip said and kept
        refused(d.owl("jobs", "drop", str(b)), "has 1 commit found on no other branch")
        p = d.owl("jobs", "drop", "--force", str(b))
        assert (
            p.returncode == 0 and f"job {b} dropped; branch {jb['branch']} deleted at " in p.stdout
        )
        assert jb["branch"] not in branches(project)
        assert not Path(jb["worktree"]).exists() and jb["worktree"] not in worktrees(project)
        assert d.job(b)["state"] == "cancelled"
        again = d.owl("jobs", "drop", str(b))
        assert again.returncode == 0 and "already dropped" in again.stdout, again

        # extend: an exhausted Job gets attempts and its place back
        jc = d.job(c)
        assert jc["attempts_left"] == 0 and jc["runs"][0]["exit_code"] == 3
        assert jc["runs"][0]["outcome"] == "failed"
        d.machine("input")
        out = d.json("jobs", "extend", str(c), "--attempts", "2")
        assert out["state"] == "pending" and out["attempts_left"] == 2 and out["position"] == 1
        refused(d.owl("jobs", "extend", str(a)), "only an exhausted, blocked or pending")
        assert git(project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def test_dropping_an_active_job_needs_force_and_ends_its_run(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("setsid-child=60 tick=0.2 sleep=60", project)
        d.machine("idle")
        run = d.wait_run(job, "running")
        wait_for(lambda: len(d.agent_pids()) == 2, what="agent and its child")
        refused(d.owl("jobs", "drop", str(job)), "has a Run going")
        assert d.job(job)["state"] == "active"
        assert set(process_states(d.agent_pids()).values()) != {"gone"}
        branch = d.job(job)["branch"]
        assert branch in branches(project)
        out = d.json("jobs", "drop", str(job), "--force")
        assert out["state"] == "cancelled"
        wait_for(lambda: d.alive_agent_pids() == [], what="every process of the Run gone")
        j = d.wait_job(job, "cancelled")
        wait_for(lambda: d.job(job)["runs"][0]["outcome"] == "interrupted", what="the Run recorded")
        assert d.job(job)["runs"][0]["id"] == run["id"]
        assert branch not in branches(project)
        assert j["worktree"] is None or not Path(j["worktree"]).exists()


def test_status_reads_at_a_glance_and_its_json_carries_the_fields(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", {"interruption": {"grace_window": "1m"}}) as d:
        first = d.add("tick=0.2 sleep=60", project)
        second = d.add("sleep=60", project)
        text = d.ok("status")
        assert "machine:    in use" in text and "on AC" in text and "detectors: manual" in text
        assert "paused:     no" in text and "runs:       none live" in text
        assert f"next: job {first}" in text and "waiting: the machine is in use" in text
        d.machine("idle")
        d.wait_run(first, "running")
        text = d.ok("status")
        assert "machine:    idle for" in text
        assert f"job {first} · running" in text and f"next: job {second}" in text
        # A Run is running from its reaper's start; its agent is a fork later.
        wait_for(lambda: d.agent_pids(), what="the agent to note its pid")
        d.machine("input")
        d.wait_run(first, "frozen")
        st = d.status()
        assert {"idle", "idle_for_s", "on_ac_power"} <= set(st["machine"])
        assert st["machine"]["idle"] is False and st["machine"]["on_ac_power"] is True
        assert st["paused"] is False and st["shift"] is None
        [r] = st["runs"]
        assert {"id", "job_id", "state", "frozen_by", "grace_left_s", "pids"} <= set(r)
        assert (r["job_id"], r["state"], r["frozen_by"]) == (first, "frozen", "machine")
        assert 0 < r["grace_left_s"] <= 60 and r["pids"]
        assert [(q["id"], q["position"], q["state"]) for q in st["queue"]] == [
            (first, 1, "active"),
            (second, 2, "pending"),
        ]
        text = d.ok("status")
        assert re.search(
            rf"job {first} · frozen by machine · (\d+s|1m) of its grace window left"
            rf"( · not contained)? · worked ",
            text,
        ), text
        assert f"queue:      1 job waiting · next: job {second}" in text
        shown = d.job(first)
        assert {"id", "state", "position", "branch", "worktree", "attempts_left", "runs"} <= set(
            shown
        )
        assert {
            "id",
            "attempt",
            "outcome",
            "ended_by",
            "reason",
            "exit_code",
            "started_at",
            "ended_at",
        } <= set(shown["runs"][0])
        out = d.json("stop")
        assert out["runs"] == [r["id"]]
        wait_for(lambda: d.status()["runs"] == [], what="the Run ended")
        assert d.job(first)["runs"][0]["ended_by"] in ("sigterm", "sigkill")


def test_logs_and_logs_follow_until_the_run_ends(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("tick=0.1 sleep=1.5 exit=0", project)
        d.machine("idle")
        run = d.wait_run(job, "running")
        follow = subprocess.Popen(
            [*OWL, "logs", str(job), "-f"],
            env=d.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = follow.communicate(timeout=20)
        assert follow.returncode == 0, err
        assert d.job(job)["runs"][0]["ended_at"] is not None  # it waited for the end
        assert "tick 1" in out and "tick 5" in out
        whole = d.ok("logs", str(job))
        assert out.splitlines()[0] == f"job {job} · run {run['id']} · attempt 1 · running"
        assert whole.splitlines()[0] == f"job {job} · run {run['id']} · attempt 1 · succeeded"
        assert whole.splitlines()[1:] == out.splitlines()[1:]
        lines = [json.loads(x) for x in d.ok("logs", str(job), "--json").splitlines()]
        assert [x["line"] for x in lines] == out.splitlines()[1:]  # no header
        assert {x["run"] for x in lines} == {run["id"]}


def test_shift_verbs(daemon):
    assert daemon.ok("shift", "status").strip() == "no Shift"
    out = daemon.json("shift", "start", "--for", "1h")
    assert out["on"] is True and 3500 < out["left_s"] <= 3600
    assert "Shift started" in out["message"]
    assert daemon.status()["shift"]["on"] is True
    assert "Shift on" in daemon.ok("shift", "status")
    assert "Shift ended" in daemon.ok("shift", "stop")
    assert daemon.status()["shift"] is None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_owl_machine_tells_the_manual_machine_what_it_does(tmp_path: Path) -> None:
    # The harness says these through the socket; here, once, through the command.
    with OwlDaemon(tmp_path / "home") as d:
        d.ok("machine", "battery")
        assert d.status()["machine"]["on_ac_power"] is False
        d.ok("machine", "ac")
        assert d.status()["machine"]["on_ac_power"] is True
