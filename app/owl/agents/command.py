"""Any agent with a command line: an argv template from `[agents.NAME] command`.

Each element of the template is one argument. Placeholders are replaced
inside each element, and the result is passed to the agent as is: there is
no shell, so quotes, spaces, `$(...)`, `;` and newlines in a prompt reach the
agent verbatim and are never run. Write `{{` and `}}` for literal braces.

Placeholders:

    {prompt}        the person's words only: the Job's prompt, and on a later
                    Run the replies they gave it (oldest first)
    {instructions}  Owl's text for this Run: on later attempts what earlier
                    Runs left (why the last one failed, the handoff, the
                    branch's commits), then the rules of an unattended Run
    {handoff}       the text of .owl/HANDOFF.md, or "" when there is none
                    (its path is in $OWL_HANDOFF)
    {worktree}      the Job's worktree (also the agent's working directory)
    {job_id}        the Job's id
    {run_id}        the Run's id

The person's words and Owl's are kept apart so that an agent which uses its
argument as a commit message, a branch name or a file gets only the task;
give it `{instructions}` too (e.g. "{prompt}\n\n{instructions}") when it
should hear the rules and what earlier Runs left.

An option's value is safest in the `--option={prompt}` form: a prompt that
starts with "-" cannot then be taken for an option.

Examples (config.toml; codex, gemini, opencode, copilot, pi and aider are built in, see their
drivers, and a `command` replaces a built-in driver of that name):

    # An agent of your own, with the whole prompt as one argument.
    [agents.mine]
    command = ["my-agent", "--task={prompt}"]

    # aider started your own way.
    [agents.aider]
    command = ["aider", "--yes-always", "--message={prompt}"]

A usage limit is a wait, not a failure, when the agent's table says how to
recognise it: `limit_pattern` (a regular expression searched in the last
lines of its output) and/or `limit_exit_code`; when both are given both must
hold. The words matched may say when it resets ("resets 3pm", "try again in
2 hours"); otherwise Owl backs off, 5 minutes doubling to 1 hour.

Use one with `owl add --agent mine "..."`, or make it the default with
`[agent] default = "mine"`.
"""

from __future__ import annotations

import os
import re
import shutil
import string
from pathlib import Path
from typing import Any

from owl.agents.argfit import by_file
from owl.agents.base import RunContext, run_env
from owl.agents.handoff import instructions, person_words, read_handoff
from owl.agents.where import not_on_path
from owl.agents.resets import reset_time, reset_words
from owl.rules.jobrules import Report

PLACEHOLDERS = ("prompt", "instructions", "handoff", "worktree", "job_id", "run_id")

# Parsed template element: literal text, or a placeholder name.
_Piece = tuple[str, str | None]


def parse_element(element: str) -> list[_Piece]:
    """Split one template element into (literal, placeholder-or-None) pieces.

    string.Formatter's parser handles `{{`/`}}`; anything beyond a bare known
    name (`{prompt!r}`, `{prompt:>9}`, `{prompt.upper}`, `{0}`) is refused, so
    the template language stays exactly what the docstring says.
    """
    pieces: list[_Piece] = []
    try:
        parsed = list(string.Formatter().parse(element))
    except ValueError as e:
        raise ValueError(f"{element!r}: {e} (write {{{{ and }}}} for literal braces)") from None
    for literal, name, spec, conversion in parsed:
        if name is None:
            pieces.append((literal, None))
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise ValueError(
                f"{element!r}: unknown placeholder {shown} "
                f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}; "
                "write {{ and }} for literal braces)"
            )
        pieces.append((literal, name))
    return pieces


def expand(template: list[str], values: dict[str, str]) -> list[str]:
    """The argv for `template` with placeholders replaced by `values`.

    Built by concatenation, never by str.format on the result, so a value
    that itself contains braces is left alone.
    """
    out = []
    for element in template:
        out.append(
            "".join(lit + (values[name] if name else "") for lit, name in parse_element(element))
        )
    return out


class CommandDriver:
    """An agent started from an argv template."""

    stream_json = False

    def __init__(self, name: str, agent_config: dict[str, Any]) -> None:
        self.name = name
        self.template: list[str] = list(agent_config.get("command") or [])
        pattern = agent_config.get("limit_pattern")
        self.limit_pattern = re.compile(pattern) if pattern else None
        self.limit_exit_code: int | None = agent_config.get("limit_exit_code")

    def problem(self) -> str | None:
        if not self.template:
            return f'agents.{self.name}.command is empty: give the agent\'s argv, e.g. ["my-agent", "{{prompt}}"]'
        for element in self.template:
            try:
                parse_element(element)
            except ValueError as e:
                return f"agents.{self.name}.command: {e}"
        exe = self.template[0]
        if "{" in exe:
            return None  # decided per Run (e.g. "{worktree}/agent.sh")
        if shutil.which(exe) is None:
            if os.sep in exe:
                return f"agent {self.name}: {exe} is not an executable file (check agents.{self.name}.command)"
            return (
                f"agent {self.name}: {exe} was {not_on_path(exe)} "
                f"(check agents.{self.name}.command)"
            )
        return None

    def values(self, ctx: RunContext) -> dict[str, str]:
        """What each placeholder stands for in this Run."""
        return {
            # longer than one argument may be: by file, the argument saying where
            "prompt": by_file(person_words(ctx), Path(ctx.worktree)),
            "instructions": instructions(ctx),
            "handoff": read_handoff(Path(ctx.worktree)) or "",
            "worktree": str(ctx.worktree),
            "job_id": str(ctx.job_id),
            "run_id": str(ctx.run_id),
        }

    def argv(self, ctx: RunContext) -> list[str]:
        if not self.template:
            raise ValueError(f"agents.{self.name}.command is empty")
        return expand(self.template, self.values(ctx))

    def env(self, ctx: RunContext) -> dict[str, str]:
        return run_env(ctx)

    def resumes(self) -> bool:
        return False

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        """A usage limit when every condition the config gives holds: the exit
        code is `limit_exit_code`, and `limit_pattern` matches a line of the
        output's tail (whose words may say when it resets). Neither set: none."""
        if code == 0 or (self.limit_pattern is None and self.limit_exit_code is None):
            return Report()
        if self.limit_exit_code is not None and code != self.limit_exit_code:
            return Report()
        line = ""
        if self.limit_pattern is not None:
            hits = [ln for ln in lines[-400:] if self.limit_pattern.search(ln)]
            if not hits:
                return Report()
            line = hits[-1]
        return Report(
            limit="usage",
            resets_at=reset_time(line, now) if line else None,
            reset_said=reset_words(line) if line else None,
        )
