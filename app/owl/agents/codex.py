"""The built-in driver for OpenAI's Codex CLI (`codex exec`), checked with 0.171.0.

    codex exec --json --skip-git-repo-check SANDBOX [agents.codex.args ...] -- PROMPT
    codex exec resume --json --skip-git-repo-check SANDBOX [args ...] THREAD -- MESSAGE

- `--json` prints one event a line (`codex_stream` reads them; `render`
  shows them). The prompt is the whole of Owl's prompt with the contract
  (Codex has no appended system prompt), one argv element after `--`.
- The thread id is checked to be a UUID-like word before it goes on the
  command line, and it stands before `--`, so it is never an option.
- SANDBOX: in an Owl worktree Codex's own `--sandbox workspace-write` cannot
  commit: the worktree's `.git` is a file pointing into the project's git
  directory, which that sandbox leaves read-only ("Unable to create
  '.../index.lock': Read-only file system", and the turn still ends 0).
  Naming that directory writable does not help: with `--add-dir
  PROJECT/.git` (or `-c sandbox_workspace_write.writable_roots=[...]`)
  0.171 still refuses the lock file, as it keeps every `.git` read-only. So
  Codex runs without its own sandbox (`--dangerously-bypass-approvals-and-
  sandbox`, meant for environments sandboxed from outside), with the same
  rights as a Claude Run: Owl contains the Run.
- `agents.codex.resume = false` starts every Run fresh with the handoff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from owl.agents import jsonl
from owl.agents.base import RunContext
from owl.agents.cli import CliDriver
from owl.agents.codex_stream import read_report, session_in, with_info
from owl.agents import codex_rollout
from owl.agents.handoff import build_prompt
from owl.rules.jobrules import Report

BYPASS = "--dangerously-bypass-approvals-and-sandbox"


class CodexDriver(CliDriver):
    """Codex in `exec` mode, streaming JSON events."""

    name = "codex"
    install = "npm install -g @openai/codex, then codex login"
    stream_json = True
    reads_state = True  # its rollout, after the Run: the engine says where it is kept

    def argv(self, ctx: RunContext) -> list[str]:
        exe = self.executable() or self.path
        common = ["--json", "--skip-git-repo-check", BYPASS, *self.args]
        thread = jsonl.session_id(ctx.resume) if ctx.resume else None
        if thread:
            return [
                exe,
                "exec",
                "resume",
                *common,
                thread,
                "--",
                ctx.message or "Carry on where you stopped.",
            ]
        return [exe, "exec", *common, "--", build_prompt(ctx)]

    def session_in(self, lines: list[str]) -> str | None:
        return session_in(lines)

    def report(
        self,
        lines: list[str],
        code: int,
        *,
        resuming: bool,
        now: float,
        kept: Sequence[tuple[str, str]] = (),
    ) -> Report:
        """`kept`: the Run's own places, (inside, on the host); contained, its
        $CODEX_HOME is Owl's folder for Codex's state, not the person's."""
        rep = read_report(lines, resuming=resuming, now=now)
        # its windows and its error's own kind are in the thread's rollout, not
        # its output (owl.agents.codex_rollout)
        home = codex_rollout.run_home(kept)
        if home is None:  # contained, and its state in none of its own places
            return rep
        found = codex_rollout.windows(home, rep.session_id, now)
        if code != 0:
            rep = with_info(rep, codex_rollout.error_info(home, rep.session_id), found)
        return replace(rep, windows=tuple(found)) if found else rep
