"""A contained start that lost a race with the host: a socket gone before bwrap covered it.

Why: the host's bound unix sockets are read (`owl.sandbox.hostsockets`) a
moment before bwrap starts, and bwrap makes every mount point it is handed.
A socket whose program removed it in between (a session bus that ended, a
browser's, another sandbox's; a test suite makes and ends hundreds) leaves
bwrap making a file under a read-only bind, which fails ("bwrap: Can't create
file at PATH: Read-only file system"), and the Run with it, before the agent
has started. `owl.sandbox.bwrap.argv` leaves out a socket already gone when
the command is made; what is left is that moment. Such a start is no fault of
the agent's and no reason to spend an attempt: the engine starts the same Run
again at once (`owl.engine.runstart.start_again`), at most `AGAIN_MOST` times;
a check's lost start, a Run's or `owl jobs verify`'s, is made again the same
way (`owl.engine.runchecks`, `owl.engine.checks.Verification`).

Read from the first lines of the Run's output, which are bwrap's when it
fails to set up. The agent could print the same words; they count only where
they name a socket this Run covered that is gone from the host now, which
nothing inside can bring about (each is a mount point inside the Run, which
cannot be removed from there).

Rejected: binding each socket's folder instead (a folder of the person's
with a socket in it would turn empty inside), and asking bwrap to skip a
missing target (`--ro-bind-try` skips a missing *source* only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

HEAD = 5  # bwrap says why it could not set up before anything else is written
AGAIN_MOST = 3  # starts of one Run lost this way, before it counts as failed


def raced(
    lines: Sequence[str],
    masked: Sequence[str],
    exists: Callable[[str], bool] = os.path.lexists,
) -> str | None:
    """The covered socket whose going away failed bwrap's set-up, or None."""
    for line in lines[:HEAD]:
        if not line.startswith("bwrap: "):
            continue
        for path in masked:
            if re.search(re.escape(path) + r"(?=[:\s]|$)", line) and not exists(path):
                return path
    return None


def again_words(gone: str) -> str:
    """What the log says of a start lost this way and made again."""
    return f"the sandbox could not be set up ({gone} went away as it started); starting again"
