"""What an agent's own configuration says it needs through its sandbox: the
host's 127.0.0.1 ports of its model provider, and the variable holding its key.

A person points an agent at a provider in the agent's own files as often as in
the environment: Codex names providers in ``$CODEX_HOME/config.toml``
(``[model_providers.x] base_url = "http://127.0.0.1:11434/v1"``, ``env_key =
"X_API_KEY"``, as for a local Ollama, OpenRouter or Azure), Claude Code may set
``ANTHROPIC_BASE_URL`` in the ``env`` of ``~/.claude/settings.json``. pi names them in
``~/.pi/agent/models.json`` (``baseUrl``, ``apiKey``: a key or the variable
holding it). Contained,
such an agent would lose its key (the name looks secret, so it is dropped) and
its port (its own network reaches only the ports named), and fail every Run;
what its config names is what the person already chose to give it.

The files are read as data: bounded, never executed, and a file that is
missing, too large or broken gives nothing (the agent then says what is wrong,
as it would outside). They are the person's own (`agentstate.AgentState.fixed`),
in a home no Run sees: a Run's agent state is Owl's, with a copy of them
(`ownhome`), so what a Run writes there never decides the next Run's reach;
one that is not a regular file (a symlink) is not read.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

from owl import filesafe

from .envplan import loopback_ports
from .folders import expand

READ_MAX = 256 * 1024
ENV_NAME_MAX = 128


@dataclass(frozen=True)
class Needs:
    ports: tuple[int, ...] = ()  # the host's 127.0.0.1 ports to keep reachable
    env_keep: tuple[str, ...] = ()  # variables to pass although their names look secret
    reads: tuple[str, ...] = ()  # programs of the person's it names, read-only inside


def _read(path: str) -> bytes | None:
    """A regular file's bytes (never through a symlink, never past READ_MAX)."""
    return filesafe.read_bounded(path, READ_MAX, follow=False)


def _env_name(value: object) -> str | None:
    if (
        isinstance(value, str)
        and 0 < len(value) <= ENV_NAME_MAX
        and (value[0].isalpha() or value[0] == "_")
        and all(c.isalnum() or c == "_" for c in value)
    ):
        return value
    return None


def codex(home: str, env: Mapping[str, str]) -> Needs:
    """Codex's ``config.toml``: every model provider's loopback ``base_url``
    port and its ``env_key``."""
    data = _read(os.path.join(expand("$CODEX_HOME|~/.codex", home, env) or "/", "config.toml"))
    try:
        doc = tomllib.loads(data.decode("utf-8")) if data else {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        doc = {}
    providers = doc.get("model_providers")
    urls: dict[str, str] = {}
    keys: list[str] = []
    for name, table in providers.items() if isinstance(providers, dict) else ():
        if not isinstance(table, dict):
            continue
        if isinstance(table.get("base_url"), str):
            urls[str(name)] = table["base_url"]
        key = _env_name(table.get("env_key"))
        if key and key not in keys:
            keys.append(key)
    return Needs(loopback_ports(urls), tuple(keys))


def claude(home: str, env: Mapping[str, str]) -> Needs:
    """The ``env`` of Claude Code's ``settings.json``: the loopback ports of the
    URLs it sets (Claude sets those variables itself, inside)."""
    folder = expand("$CLAUDE_CONFIG_DIR|~/.claude", home, env) or "/"
    data = _read(os.path.join(folder, "settings.json"))
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        doc = {}
    said = doc.get("env") if isinstance(doc, dict) else None
    helper = doc.get("apiKeyHelper") if isinstance(doc, dict) else None
    # the program that prints its key, which Claude runs inside: in sight, read-only
    program = expand(helper.split()[0], home, env) if isinstance(helper, str) and helper else ""
    reads = (program,) if program else ()
    if not isinstance(said, dict):
        return Needs(reads=reads)
    return Needs(loopback_ports({k: v for k, v in said.items() if isinstance(v, str)}), reads=reads)


def opencode(home: str, env: Mapping[str, str]) -> Needs:
    """OpenCode's ``opencode.json``: every provider's loopback
    ``options.baseURL`` port, and the variable an ``options.apiKey`` of the form
    ``{env:NAME}`` names."""
    folder = expand("$XDG_CONFIG_HOME/opencode|~/.config/opencode", home, env) or "/"
    data = _read(os.path.join(folder, "opencode.json"))
    try:
        doc = json.loads(data) if data else {}
    except (ValueError, RecursionError):
        doc = {}
    providers = doc.get("provider") if isinstance(doc, dict) else None
    urls: dict[str, str] = {}
    keys: list[str] = []
    for name, table in providers.items() if isinstance(providers, dict) else ():
        options = table.get("options") if isinstance(table, dict) else None
        if not isinstance(options, dict):
            continue
        if isinstance(options.get("baseURL"), str):
            urls[str(name)] = options["baseURL"]
        said = options.get("apiKey")
        if isinstance(said, str) and said.startswith("{env:") and said.endswith("}"):
            key = _env_name(said[5:-1])
            if key and key not in keys:
                keys.append(key)
    return Needs(loopback_ports(urls), tuple(keys))


def pi(home: str, env: Mapping[str, str]) -> Needs:
    """pi's ``models.json``: every provider's loopback ``baseUrl`` port, and the
    variable its ``apiKey`` names (pi reads a key of that form from the
    environment)."""
    folder = expand("$PI_CODING_AGENT_DIR|~/.pi/agent", home, env) or "/"
    data = _read(os.path.join(folder, "models.json"))
    try:
        doc = json.loads(data) if data else {}
    except (ValueError, RecursionError):
        doc = {}
    providers = doc.get("providers") if isinstance(doc, dict) else None
    urls: dict[str, str] = {}
    keys: list[str] = []
    for name, table in providers.items() if isinstance(providers, dict) else ():
        if not isinstance(table, dict):
            continue
        if isinstance(table.get("baseUrl"), str):
            urls[str(name)] = table["baseUrl"]
        key = _env_name(table.get("apiKey"))
        if key and key in env and key not in keys:
            keys.append(key)
    return Needs(loopback_ports(urls), tuple(keys))


READERS = {"codex": codex, "claude": claude, "opencode": opencode, "pi": pi}


def needs(agent: str, home: str, env: Mapping[str, str]) -> Needs:
    """What ``agent``'s own files say it needs (nothing for an agent Owl does
    not know the files of)."""
    reader = READERS.get(agent)
    return reader(home, env) if reader is not None else Needs()
