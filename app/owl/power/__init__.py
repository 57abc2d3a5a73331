"""Keep the machine awake while an agent works.

Most laptops suspend after some minutes without input, even on AC, which is
exactly when Owl starts work. While at least one Run is working (see
:func:`should_hold`) the daemon holds an :class:`Inhibitor`, and releases it
as soon as the last Run freezes or ends.

The lock keeps the machine from sleeping *because it is idle* and nothing
more: the person's own sleep requests (the lid, the menu, the key,
``systemctl suspend``) always win. :mod:`owl.power.logind` explains how that
line is drawn on Linux.

One backend is chosen at start, the way psutil and pystray choose theirs:

* Linux: logind over D-Bus (``logind``); else the ``systemd-inhibit`` tool
  (``systemd-inhibit``); else ``none``, with ``problem`` saying why.
* macOS: ``caffeinate -i -w <pid>`` (``caffeinate``).
* Anything else, or keep-awake turned off: ``none``.

Whatever the backend, a lock dies with the daemon, and trouble never stops a
Run: it is recorded in ``problem`` and logged once.
"""

from __future__ import annotations

import shutil
import sys

from owl.power.base import CONSEQUENCE, InhibitError, Inhibitor, NullInhibitor
from owl.power.policy import WORKING_STATES, should_hold

__all__ = [
    "Inhibitor",
    "InhibitError",
    "NullInhibitor",
    "WORKING_STATES",
    "make_inhibitor",
    "should_hold",
]


def make_inhibitor(enabled: bool = True) -> Inhibitor:
    """The keep-awake backend for this machine; `enabled` is power.keep_awake."""
    if not enabled:
        return NullInhibitor()
    if sys.platform == "darwin":
        return _make_macos()
    if sys.platform.startswith("linux"):
        return _make_linux()
    return NullInhibitor(f"keeping {sys.platform} awake is not supported: {CONSEQUENCE}")


def _make_linux() -> Inhibitor:
    from owl.power import logind, systemd_inhibit

    no_logind = logind.unavailable()
    if no_logind is None:
        return logind.LogindInhibitor()
    no_tool = systemd_inhibit.unavailable()
    if no_tool is None:
        return systemd_inhibit.SystemdInhibitInhibitor()
    return NullInhibitor(f"{no_logind} and {no_tool}: {CONSEQUENCE}")


def _make_macos() -> Inhibitor:
    from owl.power import caffeinate

    if shutil.which(caffeinate.TOOL) is None:
        return NullInhibitor(f"no {caffeinate.TOOL}: {CONSEQUENCE}")
    return caffeinate.CaffeinateInhibitor()
