"""The claude driver against the real Claude Code CLI, with a stub model.

These check the CLI behaviour Owl is built on: the driver's argv gets the
prompt and the contract through verbatim, tools really run in the Job's
worktree and can commit, a Bash tool runs in a session of its own (which is
why a Run is frozen and ended as a process tree, not a process group), and
SIGTERM ends claude with status 143.

They need the CLI: tools/install-claude.sh installs it. Without it they fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psutil
import pytest
from support.anthropic_stub import AnthropicStub, Bash, Request, Text
from support.claude import require_claude

from owl.agents import ClaudeDriver, RunContext, build_prompt, contract
from owl.agents.render import render_line
from support.plaingit import GIT_ENV, git

pytestmark = pytest.mark.claude


T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def make_worktree(root: Path) -> tuple[Path, str]:
    """A project repo and a Job worktree on owl/job-1, as Owl lays them out."""
    project = root / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    (project / "README").write_text("project\n")
    git(project, "add", "README")
    git(project, "commit", "-q", "-m", "base")
    base = git(project, "rev-parse", "HEAD")
    worktree = root / "worktrees" / "job-1"
    git(project, "worktree", "add", "-q", "-b", "owl/job-1", str(worktree), base)
    return worktree, base


def make_ctx(worktree: Path, base: str, prompt: str, claude: str) -> RunContext:
    return RunContext(
        job_id=1,
        run_id=7,
        attempt=1,
        job_prompt=prompt,
        worktree=worktree,
        branch="owl/job-1",
        base=base,
        agent_config={"path": claude},
    )


def agent_env(
    stub: AnthropicStub, home: Path, driver: ClaudeDriver, ctx: RunContext
) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    return {**os.environ, **GIT_ENV, **stub.env(home), **driver.env(ctx)}


Outcome = tuple[subprocess.CompletedProcess, list[Request], RunContext]


def run_claude(tmp: Path, prompt: str, script: list) -> Outcome:
    claude = require_claude()
    worktree, base = make_worktree(tmp)
    ctx = make_ctx(worktree, base, prompt, claude)
    driver = ClaudeDriver(ctx.agent_config)
    assert driver.problem() is None
    with AnthropicStub(script) as stub:
        done = subprocess.run(
            driver.argv(ctx),
            cwd=worktree,
            env=agent_env(stub, tmp / "home", driver, ctx),
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
        requests = stub.main_requests()
    return done, requests, ctx


# --------------------------------------------------------------- one run


def test_scripted_bash_turn_edits_and_commits_on_the_branch(tmp_path: Path) -> None:
    done, requests, ctx = run_claude(
        tmp_path,
        "Add a hello file and commit it.",
        [
            Bash(
                "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello' && echo committed"
            ),
            Text("Committed hello.txt."),
        ],
    )
    assert done.returncode == 0, done.stderr
    assert git(ctx.worktree, "log", "--format=%s", f"{ctx.base}..owl/job-1") == "Add hello"
    assert (ctx.worktree / "hello.txt").read_text() == "hello\n"
    assert git(ctx.worktree, "status", "--porcelain") == ""
    # The tool really ran (its output went back to the model) and the log reads well.
    assert requests[1].tool_results()[0]["content"] == "committed"
    rendered = [render_line(line) for line in done.stdout.splitlines()]
    assert any(r and r.startswith("→ Bash: echo hello > hello.txt") for r in rendered)
    assert "← committed" in rendered
    assert any(r and r.startswith("✓ result: Committed hello.txt.") for r in rendered)


NASTY = (
    'Fix the "parser"; don\'t touch $(rm -rf ~) or `id` $HOME *\n'
    "--help\n-rf --dangerously-skip-permissions\n\n  indented line\ttab\n"
)


@pytest.fixture(scope="module")
def nasty_run(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return run_claude(tmp_path_factory.mktemp("nasty"), NASTY, [Text("Understood.")])


def test_prompt_reaches_the_model_verbatim(nasty_run: Outcome) -> None:
    done, requests, ctx = nasty_run
    assert done.returncode == 0, done.stderr
    sent = build_prompt(ctx, with_contract=False)
    assert sent == NASTY
    assert requests[0].user_texts()[-1] == sent
    assert not (ctx.worktree / "~").exists()  # nothing in it was run


def test_prompt_that_is_only_an_option_is_still_the_prompt(tmp_path: Path) -> None:
    done, requests, _ = run_claude(tmp_path, "--help", [Text("ok")])
    assert done.returncode == 0, done.stderr
    assert "Usage: claude" not in done.stdout
    assert requests[0].user_texts()[-1] == "--help\n"


def test_system_prompt_carries_the_contract(nasty_run: Outcome) -> None:
    done, requests, ctx = nasty_run
    system = requests[0].system_text()
    assert contract(ctx) in system
    assert "No human will answer questions" in system and ".owl/HANDOFF.md" in system


# ---------------------------------------------------- a run with a long tool


class LongTool:
    """claude running `echo start; sleep 30; echo x > f` through its Bash tool.

    The leading echo is needed: claude 2.1.x refuses a command that *starts*
    with a long sleep followed by more work ("use Monitor instead").
    """

    def __init__(self, tmp: Path) -> None:
        claude = require_claude()
        worktree, base = make_worktree(tmp)
        self.ctx = make_ctx(worktree, base, "Run the slow step.", claude)
        driver = ClaudeDriver(self.ctx.agent_config)
        self.stub = AnthropicStub(
            [Bash("echo start; sleep 30; echo x > f", timeout_ms=120_000), Text("done")]
        ).start()
        self.out = open(tmp / "stdout.jsonl", "wb")
        # Like the engine: the agent leads a session of its own.
        self.proc = subprocess.Popen(
            driver.argv(self.ctx),
            cwd=worktree,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=agent_env(self.stub, tmp / "home", driver, self.ctx),
            start_new_session=True,
        )
        self.claude = psutil.Process(self.proc.pid)
        self.seen: dict[int, psutil.Process] = {}
        self.sleep = wait_for("the Bash tool's sleep to start", self._find_sleep)

    def _find_sleep(self) -> psutil.Process | None:
        try:
            children = self.claude.children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        for p in children:
            self.seen[p.pid] = p
        for p in children:
            try:
                if p.name() == "sleep" and p.cmdline()[1:] == ["30"]:
                    return p
            except psutil.NoSuchProcess:
                continue
        return None

    def close(self) -> None:
        """End whatever is left, each process checked against its start time."""
        for p in [*self.seen.values(), self.claude]:
            try:
                p.kill()  # psutil refuses a pid reused by another process
            except psutil.NoSuchProcess:
                pass
        try:
            self.proc.wait(timeout=10)
        finally:
            self.out.close()
            self.stub.close()


@pytest.fixture
def long_tool(tmp_path: Path) -> Iterator[LongTool]:
    run = LongTool(tmp_path)
    try:
        yield run
    finally:
        run.close()


def test_bash_tool_runs_in_a_session_of_its_own(long_tool: LongTool) -> None:
    claude_sid = os.getsid(long_tool.claude.pid)
    assert claude_sid == long_tool.claude.pid
    tool_sid = os.getsid(long_tool.sleep.pid)
    # The fact the supervisor is built on: signalling claude's session or
    # group would miss the tool.
    assert tool_sid != claude_sid
    assert os.getpgid(long_tool.sleep.pid) != os.getpgid(long_tool.claude.pid)
    assert long_tool.sleep.cwd() == str(long_tool.ctx.worktree)
    # The Run's tag reaches the tool too: that is how survivors are found.
    assert long_tool.sleep.environ().get("OWL_RUN_ID") == "7"


def test_sigterm_ends_claude_with_143(long_tool: LongTool) -> None:
    long_tool.proc.send_signal(signal.SIGTERM)
    assert long_tool.proc.wait(timeout=15) == 128 + signal.SIGTERM
