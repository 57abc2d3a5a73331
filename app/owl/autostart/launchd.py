"""macOS LaunchAgent: `~/Library/LaunchAgents/dev.owl.plist`.

Pure file writing with plistlib from `templates/dev.owl.plist`: the agent
runs at login in the Aqua (GUI) session, since the tray needs one, and is
not kept alive, so Quit from the menu stays quit. It is picked up at the
next login; nothing is loaded into launchd now.
"""

from __future__ import annotations

import plistlib
from pathlib import Path

from owl.autostart.command import install, owl_environment, template, uninstall

LABEL = "dev.owl"


def path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def render(argv: list[str], env: dict[str, str] | None = None) -> bytes:
    doc = plistlib.loads(template(f"{LABEL}.plist"))
    doc["Label"] = LABEL
    doc["ProgramArguments"] = list(argv)
    if env:
        doc["EnvironmentVariables"] = dict(env)
    else:
        doc.pop("EnvironmentVariables", None)
    return plistlib.dumps(doc, fmt=plistlib.FMT_XML)


def enable(argv: list[str]) -> Path:
    return install(path(), render(argv, owl_environment()))


def disable() -> Path:
    return uninstall(path())


def status() -> tuple[bool, Path]:
    target = path()
    try:
        doc = plistlib.loads(target.read_bytes())
    except (FileNotFoundError, plistlib.InvalidFileException, ValueError):
        return False, target
    return not doc.get("Disabled", False), target
