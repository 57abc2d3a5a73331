"""The built-in driver for GitHub Copilot CLI (npm `@github/copilot`), checked with 1.0.102.

    copilot --output-format=json --allow-all-tools --allow-all-paths --no-ask-user
            --no-auto-update [agents.copilot.args ...] --session-id=NEW --prompt=PROMPT
    copilot ... [args ...] --resume=SESSION --prompt=MESSAGE

- `--prompt` (`-p`) runs one prompt non-interactively; the `--prompt=TEXT`
  form, since `-p TEXT` takes a prompt starting with "-" for an option.
  `--allow-all-tools` (required without a person to ask), `--allow-all-paths`
  and `--no-ask-user` as an unattended Run needs: Owl contains the Run.
  `--no-auto-update`: the version the person installed is the one that runs.
- `--output-format=json` prints one event a line (`copilot_stream` reads
  them; `render_copilot` shows them). The session's id is printed only on
  the last line, so a Run stopped before its end would leave none: Owl names
  each new session itself (`--session-id=UUID`, which Copilot takes for a new
  session) and keeps that id once Copilot has taken the prompt into it.
  A later Run carries it on with `--resume=SESSION`, the id checked first.
- The model is Copilot's: a GitHub account signed in (`copilot login`, or
  COPILOT_GITHUB_TOKEN / GH_TOKEN / GITHUB_TOKEN), or a provider of the
  person's own (COPILOT_PROVIDER_BASE_URL, ..., see `copilot help
  environment`); a 127.0.0.1 provider URL in the environment is kept
  reachable from inside the Run.
- `agents.copilot.resume = false` starts every Run fresh with the handoff.
"""

from __future__ import annotations

import uuid

from owl.agents import jsonl
from owl.agents.base import RunContext
from owl.agents.cli import CliDriver
from owl.agents.copilot_stream import read_report, session_of
from owl.agents.handoff import build_prompt
from owl.rules.jobrules import Report

FLAGS = (
    "--output-format=json",
    "--allow-all-tools",
    "--allow-all-paths",
    "--no-ask-user",
    "--no-auto-update",
)


class CopilotDriver(CliDriver):
    """Copilot CLI's programmatic mode, streaming JSON events."""

    name = "copilot"
    install = "npm install -g @github/copilot, then copilot login"
    stream_json = True

    def __init__(self, agent_config: dict | None = None) -> None:
        super().__init__(agent_config)
        self.chosen: str | None = None  # the id this driver gave a new session

    def argv(self, ctx: RunContext) -> list[str]:
        head = [self.executable() or self.path, *FLAGS, *self.args]
        session = jsonl.session_id(ctx.resume) if ctx.resume else None
        if session:
            self.chosen = session  # the same session, named again by the CLI at its end
            message = ctx.message or "Carry on where you stopped."
            return [*head, f"--resume={session}", f"--prompt={message}"]
        self.chosen = str(uuid.uuid4())
        return [*head, f"--session-id={self.chosen}", f"--prompt={build_prompt(ctx)}"]

    def session_in(self, lines: list[str]) -> str | None:
        session, started = session_of(lines)
        return session or (self.chosen if started else None)

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, code, resuming=resuming, now=now, chosen=self.chosen)
