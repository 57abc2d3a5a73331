"""Checks gate review: the real daemon, real agents, real check processes and signals.

A project declares `[[checks]]` in `.owl.toml` on its base branch; after an
agent exits 0 each check runs in the worktree in a process tree of its own,
frozen, thawed and ended exactly like the agent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from owlproc import AGENT, OwlDaemon, make_project, process_states, wait_for

# An agent that keeps what it was given (the scriptable agent cannot show
# it): the prompt, then Owl's instructions; then does what the prompt's steps say.
DUMP_AND_RUN = (
    "import os, runpy, sys\n"
    "with open(os.path.join(os.environ['PROMPT_DIR'], os.environ['OWL_RUN_ID']), 'w') as f:\n"
    "    f.write(sys.argv[1] + '\\n\\n' + sys.argv[2])\n"
    f"sys.argv = [{AGENT!r}, sys.argv[1]]\n"
    f"runpy.run_path({AGENT!r}, run_name='__main__')\n"
)


def toml_checks(*checks: tuple[str, str, str | None]) -> str:
    out = []
    for name, run, timeout in checks:
        out.append(
            "[[checks]]\n"
            f"name = {name!r}\n"
            f"run = '''{run}'''\n" + (f"timeout = {timeout!r}\n" if timeout else "")
        )
    return "\n".join(out)


def project_with(tmp_path: Path, *checks: tuple[str, str, str | None]) -> Path:
    files = {"README": "a project\n"}
    if checks:
        files[".owl.toml"] = toml_checks(*checks)
    return make_project(tmp_path / "proj", files)


def daemon(tmp_path: Path, config: dict | None = None, env: dict | None = None) -> OwlDaemon:
    prompts = tmp_path / "prompts"
    prompts.mkdir(exist_ok=True)
    cfg = {
        "agents": {
            "dump": {"command": [sys.executable, "-c", DUMP_AND_RUN, "{prompt}", "{instructions}"]}
        },
        "agent": {"default": "dump"},
    }
    for k, v in (config or {}).items():
        cfg.setdefault(k, {}).update(v)
    return OwlDaemon(tmp_path / "home", cfg, env={"PROMPT_DIR": str(prompts), **(env or {})})


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def all_stopped(pids: list[int]) -> bool:
    states = process_states(pids)
    return bool(pids) and all(s == psutil.STATUS_STOPPED for s in states.values())


def all_gone(pids: list[int]) -> bool:
    return all(s in ("gone", psutil.STATUS_ZOMBIE) for s in process_states(pids).values())


def test_passing_checks_send_the_job_to_review_and_show_lists_them(tmp_path):
    project = project_with(
        tmp_path,
        ("tests", "test -f out.txt && echo 3 passed", None),
        ("lint", "echo lint ok; echo to stderr >&2", "30s"),
    )
    with daemon(tmp_path) as d:
        job = d.add("write=out.txt commit=add_out", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        [run] = j["runs"]
        assert run["outcome"] == "succeeded"
        assert [(c["name"], c["passed"], c["exit_code"]) for c in run["checks"]] == [
            ("tests", True, 0),
            ("lint", True, 0),
        ]
        assert run["checks"][0]["run"] == "test -f out.txt && echo 3 passed"
        assert run["checks"][0]["output"] == "3 passed\n"
        assert run["checks"][1]["output"] == "lint ok\nto stderr\n"
        assert all(0 <= c["duration_s"] < 10 for c in run["checks"])
        assert j["verified"] is True and j["verification"] == f"2 checks passed on run {run['id']}"
        assert len(j["commits"]) == 1 and j["commits"][0].endswith("add out")
        assert "1 file changed" in j["diffstat"]
        st = d.status()
        assert st["notice"] == f"Job {job} ready for review — 2 checks passed"
        assert st["recent"][0]["message"] == st["notice"]
        text = d.ok("jobs", "show", str(job))
        assert "check pass  tests  (exit 0," in text and "$ test -f out.txt" in text
        assert "commit" in text and "add out" in text and "changes:" in text


def test_no_checks_declared_goes_to_review_saying_it_was_not_verified(tmp_path):
    project = project_with(tmp_path)
    with daemon(tmp_path) as d:
        job = d.add("exit=0", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        assert j["verified"] is False and j["runs"][0]["checks"] == []
        assert "not verified" in j["verification"]
        assert "not verified" in d.ok("jobs", "show", str(job))
        assert "not verified" in d.status()["notice"]


def test_a_failing_check_sends_the_job_back_quoting_it_then_blocks_it(tmp_path):
    project = project_with(
        tmp_path, ("unit", "echo first line; echo FAILED test_parse: 2 != 3; exit 4", None)
    )
    with daemon(tmp_path) as d:
        job = d.add("exit=0", project, "--attempts", "2")
        d.machine("idle")
        # the first Run fails on the check; the Job waits in place for the second
        first = wait_for(
            lambda: (r := d.job(job)["runs"]) and r[0]["outcome"] and r[0],
            timeout=15,
            what="the first Run to end",
        )
        assert first["outcome"] == "failed"
        assert first["reason"] == "check unit failed (exit 4): FAILED test_parse: 2 != 3"
        assert [c["passed"] for c in first["checks"]] == [False]
        j = d.wait_job(job, "blocked", timeout=20)
        second = j["runs"][1]
        assert second["outcome"] == "failed" and len(j["runs"]) == 2
        assert "unit" in j["reason"] and "check" in j["reason"]
        assert j["attempts_left"] == 0
        prompt = (tmp_path / "prompts" / str(second["id"])).read_text()
        assert 'The check "unit" failed with exit code 4' in prompt
        assert "Command: echo first line; echo FAILED test_parse: 2 != 3; exit 4" in prompt
        assert "first line\nFAILED test_parse: 2 != 3" in prompt
        first_prompt = (tmp_path / "prompts" / str(first["id"])).read_text()
        assert "unit" not in first_prompt


def test_a_check_command_not_found_fails_with_the_shells_message(tmp_path):
    project = project_with(tmp_path, ("build", "no-such-tool-owl --all", None))
    with daemon(tmp_path) as d:
        job = d.add("exit=0", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        [run] = j["runs"]
        assert run["checks"][0]["exit_code"] == 127
        assert run["reason"].startswith("check build failed: command not found (exit 127): ")
        assert "no-such-tool-owl" in run["reason"] and "not found" in run["reason"]


def shell_and_children(pidfile: Path) -> list[int]:
    """The check's shell (it wrote its pid) and what it started, once it started something."""
    try:
        sh = psutil.Process(int(pidfile.read_text()))
        kids = [c.pid for c in sh.children(recursive=True)]
    except (FileNotFoundError, ValueError, psutil.NoSuchProcess):
        return []
    return [sh.pid, *kids] if kids else []


def test_input_freezes_a_check_and_idle_thaws_it(tmp_path):
    pidfile = tmp_path / "check.pid"
    project = project_with(
        tmp_path, ("slow", f"echo $$ > {pidfile}; sleep 2; echo done > checked.txt", None)
    )
    with daemon(tmp_path, {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("exit=0", project)
        d.machine("idle")
        pids = wait_for(lambda: shell_and_children(pidfile), what="the check's shell and its sleep")
        assert d.run_of(job)["state"] == "verifying"
        worktree = Path(d.job(job)["worktree"])
        d.machine("input")
        frozen = d.wait_run(job, "frozen")
        assert frozen["frozen_by"] == "machine" and frozen["check"] == "slow"
        wait_for(lambda: all_stopped(pids), what="every process of the check stopped")
        time.sleep(2.5)  # longer than the check's own work
        assert all_stopped(pids) and not (worktree / "checked.txt").exists()
        assert d.job(job)["state"] == "active"
        d.machine("idle")
        j = d.wait_job(job, "review")
        assert (worktree / "checked.txt").read_text() == "done\n"
        assert j["runs"][0]["checks"][0]["passed"] is True
        # frozen time is not the check's time
        assert j["runs"][0]["checks"][0]["duration_s"] < 3.0


def test_the_grace_window_ends_a_check_and_the_job_waits_without_spending_an_attempt(tmp_path):
    pidfile = tmp_path / "check.pid"
    project = project_with(tmp_path, ("forever", f"echo $$ > {pidfile}; sleep 60", None))
    with daemon(tmp_path, {"interruption": {"grace_window": "1s"}}) as d:
        job = d.add("exit=0", project)
        d.machine("idle")
        pids = wait_for(lambda: shell_and_children(pidfile), what="the check's processes")
        assert d.run_of(job)["state"] == "verifying"
        d.machine("input")
        j = d.wait_job(job, "pending", timeout=15)
        [run] = j["runs"]
        assert run["outcome"] == "interrupted"
        assert run["reason"] == "the grace window passed while the machine was in use"
        assert j["attempts_left"] == j["attempts"]
        assert run["checks"][0]["outcome"] == "interrupted"
        wait_for(lambda: all_gone(pids), what="the check's processes gone")


def test_a_check_outliving_its_timeout_fails(tmp_path):
    project = project_with(tmp_path, ("hang", "sleep 30", "1s"))
    with daemon(tmp_path) as d:
        job = d.add("exit=0", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=15)
        assert j["runs"][0]["reason"] == "check hang ran longer than its timeout (1s)"
        assert j["runs"][0]["checks"][0]["outcome"] == "failed"


def test_checks_come_from_the_base_branch_not_the_agents_worktree(tmp_path):
    project = project_with(tmp_path, ("strict", "exit 1", None))
    with daemon(tmp_path) as d:
        # the agent replaces .owl.toml in its worktree and commits it
        job = d.add("write=.owl.toml commit=loosen_checks", project, "--attempts", "1")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        [run] = j["runs"]
        assert run["reason"] == "check strict failed (exit 1)"
        assert [c["name"] for c in run["checks"]] == ["strict"]
        assert "written by run" in git(project, "show", f"{j['branch']}:.owl.toml")


def test_a_check_printing_megabytes_keeps_only_the_tail(tmp_path):
    from owl.engine.checks import LOG_CAP, OUTPUT_TAIL

    script = (
        "import sys\nfor i in range(60000): sys.stdout.write('line %06d ' % i + 'x' * 60 + '\\n')\n"
    )
    (tmp_path / "noisy.py").write_text(script)  # about 4 MB of output
    project = project_with(tmp_path, ("noisy", f"{sys.executable} {tmp_path / 'noisy.py'}", None))
    with daemon(tmp_path) as d:
        job = d.add("exit=0", project)
        biggest, stop = [0], threading.Event()

        def watch() -> None:  # the check's log as it is written: never past the cap
            while not stop.is_set():
                for f in (d.home / "logs").glob("*.check-*"):
                    try:
                        biggest[0] = max(biggest[0], f.stat().st_size)
                    except FileNotFoundError:
                        pass

        t = threading.Thread(target=watch)
        t.start()
        try:
            d.machine("idle")
            j = d.wait_job(job, "review")
        finally:
            stop.set()
            t.join()
        assert 0 < biggest[0] <= LOG_CAP
        [c] = j["runs"][0]["checks"]
        assert c["passed"]
        assert len(c["output"].encode()) <= OUTPUT_TAIL
        assert c["output"].rstrip().endswith("line 059999 " + "x" * 60)
        assert "line 000000" not in c["output"]
        kept = Path(c["log"])
        assert 0 < kept.stat().st_size <= LOG_CAP
        data = kept.read_bytes()
        assert data.rstrip().endswith(b"line 059999 " + b"x" * 60)
        assert b"line 000000" not in data
        assert not kept.with_name(kept.name + ".1").exists()


def test_jobs_verify_runs_the_checks_again_and_a_fixed_branch_goes_to_review(tmp_path):
    # the daemon was started inside a Claude Code session: its markers reach no check either
    project = project_with(
        tmp_path, ("has-fix", "test -f fix.txt && echo fixed${CLAUDECODE:+ inside}", None)
    )
    with daemon(tmp_path, env={"CLAUDECODE": "1"}) as d:
        job = d.add("exit=0", project, "--attempts", "1")
        p = d.owl("jobs", "verify", str(job))
        assert p.returncode == 1 and "pending" in p.stderr  # nothing to check yet
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        assert j["runs"][0]["checks"][0]["passed"] is False
        # the person fixes the branch by hand and asks again
        (Path(j["worktree"]) / "fix.txt").write_text("fixed\n")
        out = d.ok("jobs", "verify", str(job))
        assert "running 1 check" in out
        j = d.wait_job(job, "review")
        assert j["verify"]["passed"] is True
        assert [(c["name"], c["passed"], c["output"]) for c in j["verify"]["checks"]] == [
            ("has-fix", True, "fixed\n")
        ]
        assert len(j["runs"]) == 1  # no Run was spent on it
        assert "checks run again" in d.ok("jobs", "show", str(job))


def test_jobs_verify_is_refused_while_a_run_of_the_job_is_live(tmp_path):
    project = project_with(tmp_path, ("ok", "true", None))
    with daemon(tmp_path) as d:
        job = d.add("sleep=30", project)
        d.machine("idle")
        d.wait_run(job, "running")
        p = d.owl("jobs", "verify", str(job))
        assert p.returncode == 1 and "has a Run going" in p.stderr


def test_a_broken_owl_toml_refuses_the_add_or_blocks_the_job_before_any_agent(tmp_path):
    project = make_project(
        tmp_path / "proj", {"README": "x\n", ".owl.toml": "max_parallel = 1\ncolour = 'red'\n"}
    )
    with daemon(tmp_path) as d:
        p = d.owl("add", "--project", str(project), "--", "exit=0")
        assert p.returncode == 1
        assert ".owl.toml" in p.stderr and "unknown key colour" in p.stderr
        # a file that breaks after the Job was queued blocks it before its agent starts
        (project / ".owl.toml").write_text(toml_checks(("ok", "true", None)))
        git(project, "commit", "-qam", "fix settings")
        job = d.add("exit=0", project)
        (project / ".owl.toml").write_text("[[checks]]\nname = 'x'\nrun = \n")
        git(project, "commit", "-qam", "break settings")
        d.machine("idle")
        j = d.wait_job(job, "blocked")
        assert j["runs"] == [] and ".owl.toml" in j["reason"] and "not valid TOML" in j["reason"]
        assert list((tmp_path / "prompts").iterdir()) == []


def test_checks_and_agents_run_with_the_persons_path_not_owls_own_venv(tmp_path):
    # The README puts .venv/bin on PATH; the daemon runs from that venv. Neither
    # the agent nor a check may find Owl's own python3 first.
    venv_bin = str(Path(sys.prefix) / "bin")
    person = tmp_path / "person-bin"
    person.mkdir()
    (person / "python3").write_text("#!/bin/sh\necho the person python3\n")
    (person / "python3").chmod(0o755)
    path = os.pathsep.join([venv_bin, str(person), os.environ.get("PATH", os.defpath)])
    seen = tmp_path / "agent-path"
    project = project_with(tmp_path, ("which", "python3", None))
    cfg = {
        "agents": {"env": {"command": ["/bin/sh", "-c", 'echo "$PATH" > "$1"', "sh", str(seen)]}},
        "agent": {"default": "env"},
    }
    with daemon(tmp_path, cfg, env={"PATH": path}) as d:
        job = d.add("look", project)
        d.machine("idle")
        j = d.wait_job(job, "review")
        assert venv_bin not in seen.read_text().strip().split(os.pathsep)
        [check] = j["runs"][0]["checks"]
        assert check["output"] == "the person python3\n"
        assert check["python3"] == str(person / "python3")
        assert f"python3: {person / 'python3'}" in d.ok("jobs", "show", str(job))
        log = d.ok("logs", str(job), "--check", "which")
        assert f"owl: python3 on this check's PATH: {person / 'python3'}" in log


def test_a_job_blocked_by_a_broken_check_is_rescued_by_the_person(tmp_path):
    project = project_with(tmp_path, ("unit", "python3 -m no_such_module_here", None))
    start = git(project, "rev-parse", "HEAD").strip()
    with daemon(tmp_path) as d:
        jobs = [d.add("write=out.txt commit=add_out", project, "--attempts", "1") for _ in range(2)]
        d.machine("idle")
        for job in jobs:
            d.wait_job(job, "blocked")
        first, second = jobs
        text = d.ok("jobs", "show", str(first))
        assert f"checks of .owl.toml at {start[:7]} (the commit the Job started from)" in text
        # the same broken check again: said to be the start commit's
        out = d.ok("jobs", "verify", str(first))
        assert f".owl.toml of {start[:7]} (the commit the Job started from)" in out
        wait_for(lambda: d.job(first).get("verify"), what="the verification")
        assert d.job(first)["state"] == "blocked"
        # the person fixes the check on main and runs that one instead
        (project / ".owl.toml").write_text(toml_checks(("unit", "test -f out.txt", None)))
        git(project, "commit", "-qam", "fix the unit check")
        fixed = git(project, "rev-parse", "HEAD").strip()
        p = d.owl("jobs", "verify", str(first), "--checks-from", "no-such-ref")
        assert p.returncode == 1 and "no-such-ref: no such commit" in p.stderr
        out = d.ok("jobs", "verify", str(first), "--checks-from", "main")
        assert f".owl.toml of {fixed[:7]} (main)" in out
        j = d.wait_job(first, "review")
        assert j["verify"]["passed"] and j["verify"]["checks"][0]["source"] == fixed
        assert f"checks of .owl.toml at {fixed[:7]}" in d.ok("jobs", "show", str(first))
        page = Path(d.ok("jobs", "review", str(first), "--no-open").strip().splitlines()[-1])
        html = page.read_text()
        assert (
            f"gated by the checks of <code>.owl.toml</code> at <code>{start[:7]}</code> "
            "(the commit the Job started from)" in html
        )
        assert f"at <code>{fixed[:7]}</code>:" in html
        # or accepts the other one as it is, past its failing check
        p = d.owl("jobs", "accept", str(second))
        assert p.returncode == 1 and f"owl jobs accept {second} --anyway" in p.stderr
        out = d.ok("jobs", "accept", str(second), "--anyway")
        assert "accepted past failing checks" in out
        j = d.job(second)
        assert j["state"] == "done" and j["reason"].startswith(
            "accepted past failing checks (it was blocked: its checks failed"
        )
        assert "accepted past failing checks" in d.ok("jobs", "show", str(second))
