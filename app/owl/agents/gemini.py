"""The built-in driver for Google's Gemini CLI (`gemini -p`), checked with 0.61.0.

    gemini -o stream-json --approval-mode yolo [agents.gemini.args ...] -p PROMPT
    gemini -o stream-json --approval-mode yolo [args ...] -r SESSION -p MESSAGE

- `-p` takes the prompt as its value (`-p=PROMPT` form, so a prompt starting
  with "-" is still the prompt); the session id is checked to be a UUID-like
  word and goes as `-r=SESSION`.
- yolo approves its own tool calls, which Gemini only honours in a trusted
  folder: Gemini's folder trust must be off (or the worktrees trusted), and
  with an API key `security.auth.selectedType = "gemini-api-key"` must be in
  ~/.gemini/settings.json (else "Invalid auth method selected.", exit 41).
  `problem()` reads that file and says so before a Run is wasted.
- `agents.gemini.resume = false` starts every Run fresh with the handoff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from owl.agents import jsonl
from owl.agents.base import RunContext
from owl.agents.cli import CliDriver
from owl.agents.gemini_stream import read_report, session_in
from owl.agents.handoff import build_prompt
from owl.rules.jobrules import Report


class GeminiDriver(CliDriver):
    """Gemini in headless mode, streaming JSON events."""

    name = "gemini"
    install = "npm install -g @google/gemini-cli"
    stream_json = True

    def problem(self) -> str | None:
        return super().problem() or settings_problem(
            Path(os.environ.get("GEMINI_CLI_HOME") or Path.home())
        )

    def argv(self, ctx: RunContext) -> list[str]:
        head = [
            self.executable() or self.path,
            "-o",
            "stream-json",
            "--approval-mode",
            "yolo",
            *self.args,
        ]
        session = jsonl.session_id(ctx.resume) if ctx.resume else None
        if session:
            return [*head, f"-r={session}", f"-p={ctx.message or 'Carry on where you stopped.'}"]
        return [*head, f"-p={build_prompt(ctx)}"]

    def session_in(self, lines: list[str]) -> str | None:
        return session_in(lines)

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        return read_report(lines, code, resuming=resuming, now=now)


def settings_problem(home: Path) -> str | None:
    """Why Gemini would not run unattended with this ~/.gemini/settings.json, or None.

    Only what is known to stop a headless Run: an API key in the
    environment without `security.auth.selectedType`, and folder trust on
    (yolo is then overridden). A file that cannot be read says nothing."""
    path = home / ".gemini" / "settings.json"
    try:
        settings = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        settings = {}
    if not isinstance(settings, dict):
        return None
    security = jsonl.obj(settings.get("security"))
    auth = jsonl.obj(security.get("auth")).get("selectedType")
    if os.environ.get("GEMINI_API_KEY") and auth is None:
        return (
            f'gemini: set security.auth.selectedType = "gemini-api-key" in {path} '
            "(the CLI refuses an API key without it)"
        )
    trust = jsonl.obj(security.get("folderTrust")).get("enabled")
    if trust is True:
        return (
            f"gemini: folder trust is on in {path} (security.folderTrust.enabled), so "
            "Gemini would ask before each tool; turn it off for Owl's Runs"
        )
    return None
