"""The main script of a macOS app bundle: `Owl` starts the tray, `Owl -m MODULE ...`
runs a module the way python does (see `owl.bundle` for why).

In the CLI package, since it starts the `owl` command; `owl.bundle` itself stays
pure path reading that the helpers it starts can import.
"""

from __future__ import annotations

import os
import runpy
import sys

from owl.cli import main

# What a bundle's stub sets for its own interpreter (py2app: RESOURCEPATH, ARGVZERO,
# EXECUTABLEPATH; some builds PYTHONHOME/PYTHONPATH): not for the agents Owl starts,
# whose Python would find the bundle's library instead of its own.
BUNDLE_ENV = ("PYTHONHOME", "PYTHONPATH", "RESOURCEPATH", "ARGVZERO", "EXECUTABLEPATH")


def entry(argv: list[str] | None = None) -> int:
    """The bundle's main script: `Owl` starts the tray, `Owl -m MODULE ...`
    runs a module as `python -m` would (the watchdog is started so), and
    Finder's `-psn_...` argument is dropped."""
    args = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-psn_")]
    for name in BUNDLE_ENV:  # this interpreter has read them; Owl's helpers get their own
        os.environ.pop(name, None)
    if args[:1] == ["-m"] and len(args) >= 2:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    return main(args)
