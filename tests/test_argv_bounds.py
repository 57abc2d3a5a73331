"""An agent's command line stays within the kernel's bounds (128 KiB an argument,
ARG_MAX in all): a prompt and a reply at their own bounds (100 KB each) go by
file, `.owl/PROMPT.md`, the argument saying where; the agent starts, and the
Job is never blocked for it. Real processes are started with the argv Owl
builds; the kernel is what says no."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from owl.agents import ClaudeDriver, CommandDriver, RunContext
from owl.agents import argfit
from owl.verbs.engine_side import MAX_PROMPT
from owlproc import OwlDaemon, make_project

ECHO_AGENT = Path(__file__).parent / "agents" / "script_echo_args.py"
SID = "73478951-e771-47a1-9513-56f941dedf25"
PROMPT = ("p" * 99 + "\n") * (MAX_PROMPT // 100)  # exactly at its bound
REPLY = ("r" * 99 + "\n") * (MAX_PROMPT // 100)


def ctx(worktree: Path, **kw) -> RunContext:
    args = dict(
        job_id=1,
        run_id=2,
        attempt=2,
        job_prompt=PROMPT,
        worktree=worktree,
        branch="owl/job-1",
        base="0" * 40,
        replies=(REPLY,),
        commits="",
    )
    args.update(kw)
    return RunContext(**args)


def started(argv: list[str], tmp: Path) -> list[str]:
    """Start `argv` for real, as Owl would, and return what the process received."""
    out = tmp / "args.json"
    env = {**os.environ, "OWL_TEST_ARGS_OUT": str(out)}
    subprocess.run(
        argfit.bounded(argv, env), env=env, check=True, timeout=30, stdin=subprocess.DEVNULL
    )
    return json.loads(out.read_text())["argv"]


def test_the_kernel_refuses_one_argument_past_128_kib(tmp_path):
    with pytest.raises(OSError) as e:
        subprocess.run([sys.executable, "-c", "pass", "x" * argfit.MAX_ARG_STRLEN])
    assert e.value.errno == errno.E2BIG
    subprocess.run([sys.executable, "-c", "pass", "x" * argfit.ARG_ROOM], check=True)


@pytest.mark.parametrize("resume", [None, SID], ids=["fresh", "resumed"])
def test_claudes_prompt_or_message_with_a_reply_at_the_bounds_goes_by_file(tmp_path, resume):
    agent = tmp_path / "claude"
    agent.write_text(f"#!{sys.executable}\n" + ECHO_AGENT.read_text())
    agent.chmod(0o755)
    (tmp_path / ".owl").mkdir()
    (tmp_path / ".owl" / "HANDOFF.md").write_text("h" * 64_000)
    message = f"The person replied:\n\n{REPLY}\n\nHandoff:\n{'h' * 64_000}" if resume else None
    c = ctx(tmp_path, resume=resume, message=message)
    got = started(ClaudeDriver({"path": str(agent)}).argv(c), tmp_path)
    text = got[-1]
    assert argfit.size(text) <= argfit.TEXT_ROOM
    assert f"All of them are in the file {tmp_path / '.owl' / 'PROMPT.md'}" in text
    whole = (tmp_path / ".owl" / "PROMPT.md").read_text()
    assert REPLY.strip() in whole and (resume or PROMPT.strip() in whole)
    assert got[-2] == "--"


def test_a_command_agents_prompt_goes_by_file_and_a_planted_symlink_is_not_followed(tmp_path):
    d = CommandDriver("echo", {"command": [sys.executable, str(ECHO_AGENT), "--message={prompt}"]})
    got = started(d.argv(ctx(tmp_path)), tmp_path)
    assert got[0].startswith("--message=[Owl: these instructions are")
    assert PROMPT.strip() in (tmp_path / ".owl" / "PROMPT.md").read_text()
    # .owl made a symlink to somewhere else: nothing is written there; the text is cut
    other = tmp_path / "other"
    wt = tmp_path / "wt"
    other.mkdir(), wt.mkdir()
    (wt / ".owl").symlink_to(other)
    got = started(d.argv(ctx(wt)), tmp_path)
    assert list(other.iterdir()) == [] and got[0].endswith("longer than a command line may carry]")


def test_bounded_cuts_whatever_a_template_put_together():
    argv = ["agent", "x" * 200_000, "y" * 10]
    out = argfit.bounded(argv, {})
    assert argfit.size(out[1]) <= argfit.ARG_ROOM and out[2] == "y" * 10
    many = ["agent"] + ["z" * 120_000] * 40  # 4.8 MB: past ARG_MAX
    out = argfit.bounded(many, dict(os.environ))
    assert argfit.total(out, dict(os.environ)) <= argfit.arg_max()
    subprocess.run([sys.executable, "-c", "pass", *out[1:]], check=True)


def test_a_job_with_a_prompt_and_a_reply_at_their_bounds_runs_and_is_not_blocked(tmp_path):
    project = make_project(tmp_path / "proj")
    # The agent checks it was told where its whole instructions are, and that they are there.
    code = (
        "import re, sys\n"
        "text = sys.argv[1]\n"
        "m = re.search(r'in the file (\\S+PROMPT\\.md)', text)\n"
        "whole = open(m.group(1)).read() if m else text\n"
        "open('seen.txt', 'w').write(str(len(whole)))\n"
    )
    cfg = {
        "agents": {"big": {"command": [sys.executable, "-c", code, "{prompt}"]}},
        "agent": {"default": "big"},
    }
    with OwlDaemon(tmp_path / "owl", cfg) as d:
        job = int(d.owl("add", "--project", str(project), "-", input=PROMPT).stdout.strip())
        d.ok("start")
        d.wait_job(job, "review")
        p = d.owl("jobs", "reply", str(job), "-", input=REPLY)
        assert p.returncode == 0, p.stderr
        d.ok("start")
        j = d.wait_job(job, "review", timeout=30)
        assert [r["outcome"] for r in j["runs"]] == ["succeeded", "succeeded"]
        seen = int((Path(j["worktree"]) / "seen.txt").read_text())
        assert seen >= len(PROMPT) + len(REPLY)  # the person's words, whole
        assert "could not be started" not in d.log_text()
