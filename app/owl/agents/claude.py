"""The built-in driver for Claude Code (`claude -p`).

Command line, as checked against the real CLI (2.1.x):

    claude -p --output-format stream-json --verbose
           --allowedTools Bash,Edit,...   --append-system-prompt CONTRACT
           [agents.claude.args ...]  --  PROMPT

- The prompt comes last, after `--`, so a prompt such as "--help" or "-rf ..."
  is the prompt and not an option; it is one argv element, so newlines,
  quotes and `$(...)` reach the model verbatim (no shell is involved).
- `--allowedTools` takes one comma-separated element: the option is variadic,
  and a list of separate elements would swallow anything that follows.
- stream-json (which needs --verbose with -p) gives one JSON event per line,
  which `owl.agents.render` turns into the readable log.
- The contract (the rules of an unattended Run) is the appended system
  prompt, so the prompt itself carries only the task and what earlier Runs
  left (see `build_prompt`).
- A later Run of the Job carries the conversation on: `--resume=SESSION --
  MESSAGE` in the same worktree (the CLI keys transcripts by directory), the
  message saying what happened in between (`jobrules.resume_message`). The
  session id came from the agent's own output, so it is passed only in
  claude's shape (a UUID) and joined to its option with "=": a stream that
  named its session "--help" can never put an option on the next command
  line. Anything else starts the Run fresh.
  `agents.claude.resume = false` starts every Run fresh with the handoff.
- A prompt or message longer than one argument may be goes by file
  (`agents.argfit`): `.owl/PROMPT.md`, the argument saying where.
- `--dangerously-skip-permissions` is not used: the CLI refuses it as root
  unless IS_SANDBOX=1, and the allowed-tools list is the narrower grant.
"""

from __future__ import annotations

from typing import Any

from owl.agents import cli
from owl.agents.argfit import by_file
from owl.agents.base import RunContext, run_env
from owl.agents.claude_stream import is_session_id, read_report, windows_in
from owl.rules.budget import Reading
from owl.agents.handoff import build_prompt, contract
from owl.rules.jobrules import Report

# Enough to edit files, run tests and commit without a person approving each
# step. Web access is left out on purpose: add it with allowed_tools.
DEFAULT_ALLOWED_TOOLS = (
    "Bash",
    "Edit",
    "MultiEdit",
    "Write",
    "Read",
    "Glob",
    "Grep",
    "NotebookEdit",
    "TodoWrite",
    "Task",
)


class ClaudeDriver:
    """Claude Code in print mode, streaming JSON events."""

    name = "claude"
    stream_json = True

    def __init__(self, agent_config: dict[str, Any] | None = None) -> None:
        cfg = agent_config or {}
        self.path: str = cfg.get("path") or "claude"
        self.args: list[str] = list(cfg.get("args") or [])
        self.allowed_tools: list[str] = list(cfg.get("allowed_tools") or DEFAULT_ALLOWED_TOOLS)
        self.resume: bool = cfg.get("resume") is not False

    def executable(self) -> str | None:
        """The full path of the CLI, or None when it cannot be found."""
        return cli.find(self.path)

    def problem(self) -> str | None:
        return cli.problem("claude", self.path, "install Claude Code")

    def argv(self, ctx: RunContext) -> list[str]:
        return [
            self.executable() or self.path,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            ",".join(self.allowed_tools),
            "--append-system-prompt",
            contract(ctx),
            *self.args,
            *self.tail(ctx),
        ]

    def tail(self, ctx: RunContext) -> list[str]:
        """`--resume=ID -- MESSAGE` to carry a conversation on, else `-- PROMPT`."""
        if ctx.resume and self.session_ok(ctx.resume):
            return [
                f"--resume={ctx.resume}",
                "--",
                by_file(ctx.message or "Carry on where you stopped.", ctx.worktree),
            ]
        return ["--", by_file(build_prompt(ctx, with_contract=False), ctx.worktree)]

    def session_ok(self, session_id: str) -> bool:
        """Whether `session_id` may be carried on: claude's own shape, a UUID."""
        return is_session_id(session_id)

    def env(self, ctx: RunContext) -> dict[str, str]:
        return run_env(ctx)

    def resumes(self) -> bool:
        return self.resume

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, resuming=resuming, now=now)

    def windows_in(self, line: str, now: float) -> list[Reading]:
        """The usage windows one line of the live stream reports (see `owl.agents.base`)."""
        return windows_in(line, now)
