"""The built-in driver for OpenCode (npm `opencode-ai`), checked with 1.18.33.

    opencode run --format json --auto [agents.opencode.args ...] -- PROMPT
    opencode run --format json --auto [args ...] --session=SESSION -- MESSAGE

- `--format json` prints one event a line (`opencode_stream` reads them;
  `render_opencode` shows them), each with the session's id (`ses_...`).
- `--auto` approves the tool calls OpenCode would ask about: without it a
  `run` auto-rejects them ("permission requested: ...; auto-rejecting") and
  the turn goes on without the tool. Owl contains the Run instead.
- The prompt is the whole of Owl's prompt with the contract, one argv
  element after `--`, so a prompt starting with "-" is still the prompt; the
  session id is checked to be an id-like word and goes as `--session=ID`.
- The model and provider are OpenCode's own (`opencode.json`, its auth
  file); `agents.opencode.args` adds options (`-m PROVIDER/MODEL`, `--pure`).
  A provider at 127.0.0.1 named in its opencode.json is kept reachable from
  inside the Run, with the variable its `{env:NAME}` key names
  (`sandbox.agentconf`); that file is read-only inside.
- The environment's PWD is the worktree (`run_env`): OpenCode 1.18 takes a
  session's directory, where its tools run, from PWD, not from its working
  directory.
- `agents.opencode.resume = false` starts every Run fresh with the handoff.
"""

from __future__ import annotations

from owl.agents import jsonl
from owl.agents.base import RunContext
from owl.agents.cli import CliDriver
from owl.agents.handoff import build_prompt
from owl.agents.opencode_stream import read_report, session_in
from owl.rules.jobrules import Report


class OpenCodeDriver(CliDriver):
    """OpenCode's `run`, streaming JSON events."""

    name = "opencode"
    install = "npm install -g opencode-ai"
    stream_json = True

    def argv(self, ctx: RunContext) -> list[str]:
        head = [self.executable() or self.path, "run", "--format", "json", "--auto", *self.args]
        session = jsonl.session_id(ctx.resume) if ctx.resume else None
        if session:
            return [
                *head,
                f"--session={session}",
                "--",
                ctx.message or "Carry on where you stopped.",
            ]
        return [*head, "--", build_prompt(ctx)]

    def session_in(self, lines: list[str]) -> str | None:
        return session_in(lines)

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, code, resuming=resuming, now=now)
