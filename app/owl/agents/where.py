"""Where an agent not found on the daemon's PATH is, all the same.

A refusal that only says "not found on PATH" leaves the person to guess which
PATH: the daemon's may not be their shell's (a service manager's, launchd's).
So it names the PATH searched and, where the program sits in one of the
folders installers put agents in, that folder: the one fact that says what to
change (`agents.NAME.path`, or the PATH the daemon is started with).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

# Where agents' own installers and the usual package managers put commands.
PLACES = (
    "~/.local/bin",  # Claude Code's installer, pipx, uv
    "~/bin",
    "~/.claude/local",
    "~/.npm-global/bin",
    "~/.bun/bin",
    "~/.cargo/bin",
    "~/.volta/bin",
    "~/.nvm/versions/node/*/bin",
    "~/.opencode/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/snap/bin",
)


def elsewhere(program: str, path: str | None = None) -> list[str]:
    """Executables named `program` in PLACES outside `path` (the PATH searched)."""
    searched = {os.path.realpath(p) for p in (path or "").split(os.pathsep) if p}
    found: list[str] = []
    for place in PLACES:
        for folder in sorted(glob.glob(os.path.expanduser(place))):
            exe = Path(folder) / program
            if (
                os.path.realpath(folder) not in searched
                and exe.is_file()
                and os.access(exe, os.X_OK)
                and str(exe) not in found
            ):
                found.append(str(exe))
    return found


def not_on_path(program: str, path: str | None = None) -> str:
    """'not found on PATH (/usr/bin:/bin; it is at ~/.local/bin/claude, outside it)'."""
    path = os.environ.get("PATH", "") if path is None else path
    there = elsewhere(program, path)
    tail = f"; it is at {', '.join(there[:2])}, outside it" if there else ""
    return f"not found on PATH ({path or 'empty'}{tail})"
