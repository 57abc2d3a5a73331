"""Whether macOS's ``sandbox-exec`` runs here, and takes a Run's very profile.

``seatbelt`` writes the profile and stays pure; this runs ``sandbox-exec``
(about 20 ms a time), once at the daemon's start and once per profile, so
that a Run is called contained only under a profile seen to hold.
"""

from __future__ import annotations

import os
import subprocess

from . import seatbelt

INSTALL_HINT = (
    "macOS's sandbox-exec (/usr/bin/sandbox-exec, part of macOS) is missing or refuses to run here"
)

_probed: dict[str, str | None] = {}


def probe(sandbox_exec: str = seatbelt.SANDBOX_EXEC, fresh: bool = False) -> str | None:
    """None when ``sandbox-exec`` runs a profile here, else why not, in macOS's
    words (asked once, cached; ``fresh``: asked again)."""
    if fresh or sandbox_exec not in _probed:
        if not os.access(sandbox_exec, os.X_OK):
            _probed[sandbox_exec] = f"{sandbox_exec} is not there ({INSTALL_HINT})"
        else:
            try:
                done = subprocess.run(
                    [sandbox_exec, "-p", "(version 1)(allow default)", "/usr/bin/true"],
                    check=False,
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                _probed[sandbox_exec] = (
                    None
                    if done.returncode == 0
                    else "sandbox-exec cannot apply a profile here: "
                    + (done.stderr.strip().splitlines() or ["?"])[-1]
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                _probed[sandbox_exec] = f"sandbox-exec cannot apply a profile here: {e}"
    return _probed[sandbox_exec]


_compiled: dict[int, str | None] = {}
COMPILED_MOST = 256


def compiles(text: str, sandbox_exec: str | None = None) -> str | None:
    """None when macOS takes this very profile (``sandbox-exec -p PROFILE
    /usr/bin/true``: compiled and applied to a program that does nothing),
    else why not, in sandbox-exec's words: a Run is called contained only
    under a profile seen to hold. Asked once per profile (a Job's Runs share
    theirs), about 20 ms."""
    exe = sandbox_exec or seatbelt.SANDBOX_EXEC
    key = hash((exe, text))
    if key not in _compiled:
        if len(_compiled) >= COMPILED_MOST:
            _compiled.clear()
        try:
            done = subprocess.run(
                [exe, "-p", seatbelt.with_egress(text, 1), "/usr/bin/true"],
                check=False,
                capture_output=True,
                text=True,
                timeout=10,
            )
            said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            _compiled[key] = None if done.returncode == 0 else f"the Seatbelt profile fails: {said}"
        except (OSError, subprocess.TimeoutExpired) as e:
            _compiled[key] = f"the Seatbelt profile fails: {e}"
    return _compiled[key]
