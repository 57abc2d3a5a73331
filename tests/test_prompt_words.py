"""A command agent's `{prompt}` is the person's words, through the real daemon.

An agent that uses its argument as a commit message or a file's text must get
the task, not Owl's rules: those come through `{instructions}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from owlproc import OwlDaemon, make_project

# Appends its two arguments to the file named first, as one JSON line, then
# writes $1 into the worktree and commits it, as a careless agent would.
AGENT = r"""
import json, subprocess, sys
out, prompt, instructions = sys.argv[1:4]
with open(out, "a") as f:
    f.write(json.dumps([prompt, instructions]) + "\n")
open("said.txt", "w").write(prompt)
subprocess.run(["git", "add", "said.txt"], check=True)
subprocess.run(["git", "commit", "-q", "-m", prompt], check=True)
"""


def test_an_agent_that_writes_its_argument_sees_only_the_prompt(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    seen = tmp_path / "seen.jsonl"
    agent = {"command": [sys.executable, "-c", AGENT, str(seen), "{prompt}", "{instructions}"]}
    with OwlDaemon(
        tmp_path / "home", {"agents": {"words": agent}, "agent": {"default": "words"}}
    ) as d:
        job = d.add("add a test for floats", project)
        d.machine("idle")
        d.wait_job(job, "review")
        worktree = Path(d.job(job)["worktree"])
        assert (worktree / "said.txt").read_text() == "add a test for floats"
        d.ok("jobs", "reply", str(job), "also cover NaN")
        d.wait_job(job, "review")
        runs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [prompt for prompt, _ in runs] == [
        "add a test for floats",
        "add a test for floats\n\nalso cover NaN",
    ]
    assert (worktree / "said.txt").read_text() == "add a test for floats\n\nalso cover NaN"
    first, second = (instructions for _, instructions in runs)
    assert "How this run works" in first and "Attempt" not in first
    # a reply spends no attempt: still attempt 1, as `owl jobs show` says
    assert "--- Attempt 1, run 2 ---" in second and "add a test for floats" in second
