"""The built-in driver for aider (PyPI `aider-chat`), checked with 0.86.2.

    aider --message=PROMPT --yes-always --no-pretty --no-stream
          --no-check-update --no-show-release-notes --no-show-model-warnings
          --no-analytics --no-gitignore --no-detect-urls
          [--restore-chat-history] [agents.aider.args ...]

- `--message` runs one message and exits, `--yes-always` answers aider's own
  questions (create a file, add one to the chat); it never runs a shell
  command the model suggests, as that needs an explicit yes. The prompt is the
  whole of Owl's prompt with the contract (aider has no system prompt of the
  person's), the handoff too on a later Run.
- The rest keep a night's Run quiet and the worktree clean: no update check,
  release notes, model warnings or analytics (`--no-analytics` is for this
  Run only: `--analytics-disable` would turn them off for the person's own
  use too), no `.aider*` line added to `.gitignore` (a change never
  committed), no fetching of URLs the prompt mentions.
- No session id: aider keeps its chat in `.aider.chat.history.md` in the
  worktree, so every Run after the Job's first passes
  `--restore-chat-history` (a Run that waited on a limit counts: it spent no
  attempt, but its chat is there).
- aider commits each edit itself (its default), so the Job reaches review
  with those commits.
- Environment: COLUMNS wide, so aider's console wraps no line Owl reads (a
  rate limit's reset is in the provider's words); BROWSER=true, so the
  "Open URL for more info?" that `--yes-always` says yes to after an API error
  opens nothing on the person's screen at night.
- The model and its key are aider's own settings (`--model`, `AIDER_MODEL`,
  `.aider.conf.yml`, `OPENAI_API_KEY`, ...): `agents.aider.args` adds options.

What its output says is read by `aider_output`: a limit or the service
failing after aider's own retries (aider then still exits 0, so the Report
says it gave up), the cost line, the last reply.
"""

from __future__ import annotations

from owl.agents.aider_output import read_report
from owl.agents.argfit import by_file
from owl.agents.base import RunContext, run_env
from owl.agents.cli import CliDriver
from owl.agents.handoff import build_prompt
from owl.rules.jobrules import Report

QUIET = (
    "--yes-always",
    "--no-pretty",
    "--no-stream",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-show-model-warnings",
    "--no-analytics",
    "--no-gitignore",
    "--no-detect-urls",
)
COLUMNS = "1000"  # aider's console width: no line of an error is wrapped


class AiderDriver(CliDriver):
    """aider answering one message with no questions asked."""

    name = "aider"
    install = "pipx install aider-chat"
    stream_json = False
    can_resume = False  # no session id: its chat history is restored instead

    def argv(self, ctx: RunContext) -> list[str]:
        earlier = ctx.attempt - 1 if ctx.earlier is None else ctx.earlier
        restore = ["--restore-chat-history"] if earlier > 0 else []
        prompt = by_file(build_prompt(ctx), ctx.worktree)
        return [
            self.executable() or self.path,
            f"--message={prompt}",
            *QUIET,
            *restore,
            *self.args,
        ]

    def env(self, ctx: RunContext) -> dict[str, str]:
        return {**run_env(ctx), "COLUMNS": COLUMNS, "BROWSER": "true"}

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, code, now=now)
