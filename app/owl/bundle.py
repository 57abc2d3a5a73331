"""Where this Owl runs from on macOS: inside an app bundle, or a plain Python.

Inside a py2app or briefcase bundle `sys.executable` is not a Python that
takes `-m` with Owl on its path (py2app's `Contents/MacOS/python` needs the
bundle's boot script to find its packages; briefcase's is the app's own
stub), so Owl starts its helpers through the bundle's main executable,
whose entry (`entry()` below) takes `-m MODULE ARGS...` the way python does.
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

_TERMINALS = {"Apple_Terminal": "Terminal", "iTerm.app": "iTerm", "vscode": "Visual Studio Code",
              "WezTerm": "WezTerm", "ghostty": "Ghostty", "WarpTerminal": "Warp"}


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
    the interpreter itself.
    """
    bundle = app_bundle(executable)
    if bundle is not None:
        return f"{bundle_info(bundle).get('CFBundleName') or bundle.stem} ({bundle})"
    env = os.environ if environ is None else environ
    term = env.get("TERM_PROGRAM")
    if term:
        return _TERMINALS.get(term, term)
    return f"the Python that runs Owl ({os.path.realpath(executable or sys.executable)})"


def in_bundle() -> bool:
    return app_bundle() is not None


def entry(argv: list[str] | None = None) -> int:
    """The bundle's main script: `Owl` starts the tray, `Owl -m MODULE ...`
    runs a module as `python -m` would (the watchdog is started so), and
    Finder's `-psn_...` argument is dropped."""
    args = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-psn_")]
    if args[:1] == ["-m"] and len(args) >= 2:
        import runpy

        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    from owl.cli import main

    return main(args)
