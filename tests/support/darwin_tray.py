"""Owl's tray (`owl` with no verb) on the darwin backend, over stand-in PyObjC.

pystray's own darwin backend runs, and so does Owl's `tray.darwin`; AppKit,
Foundation, objc and PyObjCTools are the stand-ins in fake_pyobjc/ beside
this file. Only the choice of backend is forced: this is Linux.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_pyobjc"))

import types  # noqa: E402

import owl.power.appnap as appnap  # noqa: E402
import owl.tray.app as tray_app  # noqa: E402
from owl.daemon import trayd  # noqa: E402

tray_app.choose_backend = lambda requested=None, **kw: "darwin"
appnap.sys = types.SimpleNamespace(platform="darwin")  # its App Nap opt-out, too
sys.exit(trayd.run())
