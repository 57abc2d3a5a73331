"""Where this Owl runs from on macOS: inside an app bundle, or a plain Python.

Inside a py2app or briefcase bundle `sys.executable` is not a Python that
takes `-m` with Owl on its path (py2app's `Contents/MacOS/python` needs the
bundle's boot script to find its packages; briefcase's is the app's own
stub), so Owl starts its helpers through the bundle's main executable,
whose entry (`owl.cli.bundled.entry`) takes `-m MODULE ARGS...` the way python does.
Privacy permissions (Input Monitoring, notifications) are granted to the
bundle there, and to the terminal or the interpreter otherwise:
`grantee()` names which, for the messages that ask for them.

Pure path and plist reading: no PyObjC here, so it is tested anywhere.
"""

from __future__ import annotations

import os
import plistlib
import sys
from collections.abc import Mapping
from pathlib import Path

_TERMINALS = {
    "Apple_Terminal": "Terminal",
    "iTerm.app": "iTerm",
    "vscode": "Visual Studio Code",
    "WezTerm": "WezTerm",
    "ghostty": "Ghostty",
    "WarpTerminal": "Warp",
}


def app_bundle(executable: str | None = None) -> Path | None:
    """The `.app` folder this interpreter lives in, or None."""
    exe = Path(executable or sys.executable).absolute()
    for parent in exe.parents:
        if parent.suffix == ".app" and (parent / "Contents" / "Info.plist").is_file():
            return parent
    return None


def bundle_info(bundle: Path) -> dict:
    """The bundle's Info.plist ({} if unreadable)."""
    try:
        return plistlib.loads((bundle / "Contents" / "Info.plist").read_bytes())
    except (OSError, plistlib.InvalidFileException, ValueError):
        return {}


def main_executable(bundle: Path) -> Path:
    """`Contents/MacOS/<CFBundleExecutable>`: what Finder and launchd start."""
    name = bundle_info(bundle).get("CFBundleExecutable") or bundle.stem
    return bundle / "Contents" / "MacOS" / str(name)


def module_argv(module: str, executable: str | None = None) -> list[str]:
    """argv that runs `python -m module` with this installation of Owl."""
    bundle = app_bundle(executable)
    if bundle is None:
        return [executable or sys.executable, "-m", module]
    return [str(main_executable(bundle)), "-m", module]


def grantee(environ: Mapping[str, str] | None = None, executable: str | None = None) -> str:
    """The app a person must grant a macOS privacy permission to.

    macOS attributes a permission to the "responsible" app: the bundle when
    Owl is one, else the terminal it was started from, else (a login item)
    the interpreter: a framework build's `Python.app`, or the binary itself.
    """
    bundle = app_bundle(executable)
    if bundle is not None:
        return f"{bundle_info(bundle).get('CFBundleName') or bundle.stem} ({bundle})"
    env = os.environ if environ is None else environ
    term = env.get("TERM_PROGRAM")
    if term:
        return _TERMINALS.get(term, term)
    real = os.path.realpath(executable or sys.executable)
    framework_app = python_app(real)
    if framework_app is not None:
        return f"Python ({framework_app}), the Python that runs Owl"
    return f"the Python that runs Owl ({real})"


def python_app(interpreter: str) -> Path | None:
    """The `Python.app` a framework build (Homebrew's, python.org's) runs as.

    Its `bin/python3.12` execs `Resources/Python.app/Contents/MacOS/Python`,
    and that app, not the path a LaunchAgent names, is what macOS lists
    under Privacy & Security."""
    for parent in Path(interpreter).parents:
        if parent.parent.name == "Versions" and parent.parent.parent.name == "Python.framework":
            app = parent / "Resources" / "Python.app"
            return app if app.is_dir() else None
    return None


def in_bundle() -> bool:
    return app_bundle() is not None
