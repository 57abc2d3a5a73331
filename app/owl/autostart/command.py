"""The command line that starts this installed Owl, for login items.

A login item must start the Owl the user turned it on from, not whichever
`owl` comes first on a PATH that a login session may not even share (pipx
and venvs put it in their own bin folder). So the `owl` script beside this
interpreter wins, and `python -m owl` with this interpreter is the fallback.
OWL_HOME, when set, travels along so the login item uses the same files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from owl.settings.paths import write_atomic


def owl_command() -> list[str]:
    """argv that starts Owl's tray with this installation (inside an app
    bundle, the bundle's own executable: its interpreter takes no `-m`)."""
    from owl.bundle import app_bundle, main_executable

    bundle = app_bundle()
    if bundle is not None:
        return [str(main_executable(bundle))]
    here = Path(sys.executable).parent
    for name in ("owl", "owl.exe"):
        script = here / name
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
    return [sys.executable, "-m", "owl"]


def owl_environment() -> dict[str, str]:
    """Environment the login item must carry (only OWL_HOME, if set)."""
    home = os.environ.get("OWL_HOME")
    return {"OWL_HOME": str(Path(home).expanduser().absolute())} if home else {}


def template(name: str) -> bytes:
    """A file from `owl/autostart/templates/`, found inside a wheel too."""
    from importlib.resources import files

    return files("owl.autostart").joinpath("templates", name).read_bytes()


def install(target: Path, data: bytes) -> Path:
    """Write a login item atomically: never a half-written one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, data, mode=0o644)
    return target


def uninstall(target: Path) -> Path:
    """Remove a login item (absent is fine); returns where it was."""
    target.unlink(missing_ok=True)
    return target


if __name__ == "__main__":
    print(owl_command())
