"""What the built-in drivers of other CLIs share: finding the executable,
saying why it cannot start, and reading `[agents.NAME]`'s common keys.

Codex, Gemini, OpenCode, Copilot and aider differ here only in their names and the words of
the install hint, so `CliDriver` holds that part once and each driver adds
its own command line and report. Claude's driver keeps its own table
(`allowed_tools`, args taken as given) but finds its CLI the same way.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from owl.agents.base import RunContext, run_env
from owl.agents.where import not_on_path


def find(path: str) -> str | None:
    """The full path of `path` (a name on PATH, or a path), or None."""
    return shutil.which(path)


def problem(name: str, path: str, install: str) -> str | None:
    """Why the CLI cannot be started, in one line, or None when it can."""
    if find(path) is not None:
        return None
    if os.sep in path:
        if os.path.exists(path):
            return f"{name} at {path} is not executable (check agents.{name}.path)"
        return f"{name} was not found at {path} (check agents.{name}.path)"
    return f"{path} was {not_on_path(path)}: {install}, or set agents.{name}.path"


class CliDriver:
    """The part of a built-in CLI driver that is the same for each CLI.

    A subclass names its CLI (`name`, also the default `path` and the config
    table), says how to install it (`install`, for `problem`) and whether it
    can carry a conversation on at all (`can_resume`); it adds `argv` and
    `report`, and `session_in` when it resumes.
    """

    name: str
    install: str
    can_resume = True

    def __init__(self, agent_config: dict[str, Any] | None = None) -> None:
        cfg = agent_config or {}
        self.path: str = cfg.get("path") or self.name
        self.args: list[str] = [str(a) for a in cfg.get("args") or []]
        # agents.NAME.resume = false starts every Run fresh with the handoff
        self.resume: bool = self.can_resume and cfg.get("resume") is not False

    def executable(self) -> str | None:
        """The full path of the CLI, or None when it cannot be found."""
        return find(self.path)

    def problem(self) -> str | None:
        return problem(self.name, self.path, self.install)

    def env(self, ctx: RunContext) -> dict[str, str]:
        return run_env(ctx)

    def resumes(self) -> bool:
        return self.resume
