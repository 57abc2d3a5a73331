"""Start Owl at login: one interface, one module per platform.

`enable()` writes the platform's login item so that *this* installed Owl
starts its tray when the user logs in; `disable()` removes it; `status()`
says whether it is on and where the file lives. The module for the running
platform is chosen once, here, the way psutil and pystray choose theirs:
XDG autostart (`xdg`) on Linux and the BSDs, a LaunchAgent (`launchd`) on
macOS.
"""

from __future__ import annotations

import sys
from pathlib import Path

from owl.autostart.command import owl_command

if sys.platform == "darwin":
    from owl.autostart import launchd as _impl
else:
    from owl.autostart import xdg as _impl


def enable() -> Path:
    """Turn start-at-login on; returns the file written."""
    return _impl.enable(owl_command())


def disable() -> Path:
    """Turn start-at-login off; returns the file removed (or that was absent)."""
    return _impl.disable()


def status() -> tuple[bool, Path]:
    """(on, path of the login item)."""
    return _impl.status()


__all__ = ["enable", "disable", "status", "owl_command"]
