"""A built-in agent's version, read from its package's own files: nothing is run.

`owl agents` says which version of each CLI it found. Asking the CLI itself
(`claude --version`) would run a program in the person's folder, outside any
sandbox, from a verb that should only look; and a configured command is the
person's (or a project's) script, which runs only as a Run. So the version
is read where the installer left it:

- npm (`npm install -g`, also with `--prefix`): the command is a symlink into
  `…/node_modules/@anthropic-ai/claude-code/…`; the `package.json` above it
  that names the package says its version;
- Claude Code's own installer: `~/.local/bin/claude` links to
  `~/.local/share/claude/versions/2.1.332`;
- pip (aider): the script lives in an environment's `bin/`, beside
  `lib/python3.X/site-packages/aider_chat-0.86.2.dist-info`.

Every file is read bounded, and a file that is not what it should be (not
JSON, another package, too large) gives no version rather than an error.
"""

from __future__ import annotations

import json
import os
import re

# The package each built-in agent is installed from.
NPM = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "pi": "@mariozechner/pi-coding-agent",
}
PIP = {"aider": "aider_chat"}

READ_MAX = 256 * 1024  # a package.json larger than this is not read
UP = 6  # folders looked through above the resolved command
_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.+-]{1,40})?$")


def installed(agent: str, command: str | None) -> str | None:
    """The version of built-in `agent` whose command is at `command`, or None."""
    if command is None:
        return None
    try:
        real = os.path.realpath(command)
    except (OSError, ValueError):
        return None
    if agent in NPM:
        return _npm(NPM[agent], real) or (_native(real) if agent == "claude" else None)
    if agent in PIP:
        return _pip(PIP[agent], command)
    return None


def _npm(package: str, real: str) -> str | None:
    folder = os.path.dirname(real)
    for _ in range(UP):
        manifest = _json(os.path.join(folder, "package.json"))
        if manifest is not None and manifest.get("name") == package:
            return _checked(manifest.get("version"))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _native(real: str) -> str | None:
    """Claude Code's own installer keeps each version as a file named by it."""
    if os.path.basename(os.path.dirname(real)) == "versions":
        return _checked(os.path.basename(real))
    return None


def _pip(dist: str, command: str) -> str | None:
    """`bin/aider` -> `lib/python3.X/site-packages/aider_chat-V.dist-info`."""
    env = os.path.dirname(os.path.dirname(os.path.abspath(command)))
    for lib in ("lib", "lib64"):
        try:
            pythons = sorted(os.listdir(os.path.join(env, lib)))
        except OSError:
            continue
        for python in pythons:
            site = os.path.join(env, lib, python, "site-packages")
            try:
                names = os.listdir(site)
            except OSError:
                continue
            for name in sorted(names):
                if name.startswith(dist + "-") and name.endswith(".dist-info"):
                    return _checked(name[len(dist) + 1 : -len(".dist-info")])
    return None


def _json(path: str) -> dict[str, object] | None:
    try:
        if os.path.getsize(path) > READ_MAX:
            return None
        with open(path, "rb") as f:
            value = json.loads(f.read(READ_MAX))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _checked(value: object) -> str | None:
    """A version as written by a package, or None for anything else."""
    return value if isinstance(value, str) and _VERSION.match(value) else None
