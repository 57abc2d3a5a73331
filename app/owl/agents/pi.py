"""The built-in driver for pi (npm `@mariozechner/pi-coding-agent`), checked with 0.73.1.

    pi -p --mode json [agents.pi.args ...] PROMPT
    pi -p --mode json [args ...] --session SESSION MESSAGE

- `-p` runs one prompt and exits; `--mode json` prints one event a line
  (`pi_stream` reads them; `render_pi` shows them), the first the session's
  header with its id. pi asks no one before a tool call: Owl contains the Run.
- pi has no `--`: an argument starting with "-" is read as an option (and
  refused) and one starting with "@" as a file to include, so a prompt or a
  message starting so goes with a space before it, which the model reads the
  same. The session id is checked to be an id-like word.
- The model and provider are pi's own: `~/.pi/agent/settings.json`
  (`defaultProvider`, `defaultModel`), `models.json` (a provider's `baseUrl`,
  `api`, `apiKey`), its sign-ins in `auth.json`; `PI_CODING_AGENT_DIR` moves
  that folder. A provider at 127.0.0.1 in models.json is kept reachable from
  inside the Run, with the variable its `apiKey` names (`sandbox.agentconf`);
  that file is read-only inside. `agents.pi.args` adds options (`--model
  PROVIDER/ID`, `--thinking low`).
- pi exits 0 even when its provider refused every retry: the report says so
  (`Report.gave_up`), and a 429 is a wait like any agent's limit.
- `PI_OFFLINE=1`: no update check or other network call at start.
- `agents.pi.resume = false` starts every Run fresh with the handoff.
"""

from __future__ import annotations

from owl.agents import jsonl
from owl.agents.base import RunContext, run_env
from owl.agents.cli import CliDriver
from owl.agents.handoff import build_prompt
from owl.agents.pi_stream import read_report, session_in
from owl.rules.jobrules import Report


def as_message(text: str) -> str:
    """`text` as pi takes a message argument: never read as an option or a file."""
    return " " + text if text.startswith(("-", "@")) else text


class PiDriver(CliDriver):
    """pi's print mode, streaming JSON events."""

    name = "pi"
    install = "npm install -g @mariozechner/pi-coding-agent"
    stream_json = True

    def argv(self, ctx: RunContext) -> list[str]:
        head = [self.executable() or self.path, "-p", "--mode", "json", *self.args]
        session = jsonl.session_id(ctx.resume) if ctx.resume else None
        if session:
            message = ctx.message or "Carry on where you stopped."
            return [*head, "--session", session, as_message(message)]
        return [*head, as_message(build_prompt(ctx))]

    def env(self, ctx: RunContext) -> dict[str, str]:
        # No update check or other network call at start: the version the
        # person installed is the one that runs, and a contained Run reaches
        # only its provider.
        return {**run_env(ctx), "PI_OFFLINE": "1"}

    def session_in(self, lines: list[str]) -> str | None:
        return session_in(lines)

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, code, resuming=resuming, now=now)
