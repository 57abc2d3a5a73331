"""Agents' headless credentials that Owl holds and passes in.

An agent that offers a credential made for running without a person (Claude
Code's ``CLAUDE_CODE_OAUTH_TOKEN`` from ``claude setup-token``, an API key)
can have it kept by Owl: one file per variable, named as the variable, in the
``credentials`` folder beside ``config.toml``, readable by the user alone.
Each Run of an agent that takes that variable (its ``env_keep``) gets it in
its environment, and nowhere else: the folder is Owl's, hidden from every Run
and check, and a check gets no agent's variables.

Why: on macOS a contained Claude Code cannot read its login from the Keychain
(the Security framework reads the login keychain's file in the calling
process, and that file stays hidden), and on Linux a Run's token refresh must
not log the person's own CLI out; a long-lived token passed in needs neither.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

FOLDER = "credentials"
MOST = 16 * 1024  # a token, not a file's worth


def folder(config: Path) -> Path:
    """Where Owl keeps them: beside the config file (``owl config path``)."""
    return config.parent / FOLDER


def held(config: Path, names: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``names`` Owl holds a file for and ``env`` does not set
    already (the person's own environment wins). A file that is a link, not
    the user's, or readable by others is left out, with a line in the log
    saying which and why."""
    out = {}
    for name in names:
        if name in env:
            continue
        value = read(folder(config) / name)
        if value:
            out[name] = value
    return out


def read(path: Path) -> str | None:
    """The value in ``path``: its first line, stripped; None when there is none
    or it may not be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("%s: not used: %s (it must be a file of yours, not a link)", path, e.strerror)
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            log.warning("%s: not used: not a file of yours", path)
            return None
        if st.st_mode & 0o077:
            log.warning(
                "%s: not used: others may read it (mode %o): chmod 600 it",
                path,
                stat.S_IMODE(st.st_mode),
            )
            return None
        text = f.read(MOST).decode("utf-8", "replace")
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else None
