"""Agent drivers: how to start each kind of agent for one Run, and the handoff.

A driver turns a `RunContext` into an argv and extra environment; the engine
spawns it. `claude` (Claude Code), `codex`, `gemini`, `opencode`, `copilot`,
`pi` and `aider` are built in (`BUILT_IN`); any other agent is a `command`
template from `[agents.NAME]` in config.
"""

from __future__ import annotations

from typing import Any, Callable

from owl.agents.base import Driver, RunContext, run_env
from owl.agents.aider import AiderDriver
from owl.agents.claude import ClaudeDriver
from owl.agents.codex import CodexDriver
from owl.agents.copilot import CopilotDriver
from owl.agents.gemini import GeminiDriver
from owl.agents.opencode import OpenCodeDriver
from owl.agents.pi import PiDriver
from owl.agents.command import CommandDriver
from owl.agents.handoff import (
    HANDOFF_PATH,
    branch_log,
    build_prompt,
    contract,
    instructions,
    person_words,
    read_handoff,
)

__all__ = [
    "Driver",
    "RunContext",
    "ClaudeDriver",
    "CommandDriver",
    "HANDOFF_PATH",
    "BUILT_IN",
    "get_driver",
    "build_prompt",
    "read_handoff",
    "branch_log",
    "contract",
    "run_env",
    "instructions",
    "person_words",
]


# The agents Owl knows by name: usable with no config beyond the CLI on PATH.
BUILT_IN: dict[str, Callable[[dict[str, Any]], Driver]] = {
    "claude": ClaudeDriver,
    "codex": CodexDriver,
    "gemini": GeminiDriver,
    "opencode": OpenCodeDriver,
    "copilot": CopilotDriver,
    "pi": PiDriver,
    "aider": AiderDriver,
}


def get_driver(name: str, agent_config: dict[str, Any] | None) -> Driver:
    """The driver for agent `name` given its `[agents.NAME]` table.

    A table with `command` is always a command agent (so even "claude" can be
    started some other way); otherwise a built-in driver (`BUILT_IN`).
    Raises ValueError with a sentence a person can act on, never KeyError.
    """
    cfg = dict(agent_config or {})
    if cfg.get("command"):
        return CommandDriver(name, cfg)
    if name in BUILT_IN:
        return BUILT_IN[name](cfg)
    raise ValueError(
        f"unknown agent {name!r}: define it in config as "
        f'[agents.{name}] with command = ["...", "{{prompt}}"], or use one '
        f"of {', '.join(BUILT_IN)}"
    )
