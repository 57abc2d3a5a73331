"""How a Run's bwrap is started: always through netns.py, with a network helper or alone.

Apart from the wrapping (``contain``) because it is Linux's launch line
only: netns.py (run as a script) hands bwrap its options and its seccomp
filter by file descriptors, so that pid 1 inside shows none of them, and,
with pasta (or slirp4netns, when no host port is forwarded), gives the Run a
network namespace of its own. Which helper is found, and the words that say
what fixes a missing one, are here too.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from . import bwrap, policy

NETNS = str(Path(__file__).with_name("netns.py"))


def alone(argv: list[str], own: list[str]) -> list[str]:
    """bwrap's argv started with no network helper, through netns.py all the
    same (``-``): it hands bwrap its options and its seccomp filter by fds, so
    that pid 1 inside shows none of them, and leaves out a host socket gone
    between the argv's making and bwrap's start (bwrap cannot make the file to
    cover on the read-only root, and the Run would fail), and says whether
    bwrap failed at its own start (``own``: those options); SIGTERM ignored."""
    return [sys.executable, "-I", "-S", NETNS, "-", "-", *own, "--", *argv]


def networked(helper: str, ports: str, opts: list[str], argv: list[str]) -> list[str]:
    """bwrap's argv started through netns.py with ``helper`` (pasta, or
    slirp4netns) giving the Run a network of its own, the host's 127.0.0.1
    ``ports`` forwarded (``-``: none); ``opts``: netns.py's own (its report,
    the allow-list, the filter, bwrap's setup report)."""
    return [sys.executable, "-I", "-S", NETNS, helper, ports, *opts, "--", *argv]


def seccomp(filt: bytes | str) -> list[str]:
    """netns.py's option that hands bwrap the filter (none where it could not be built)."""
    return ["--filter", filt.hex()] if isinstance(filt, bytes) else []


def argv_none(
    pol: policy.Policy, command: Sequence[str], path: str | None, env_path: str | None, version: str
) -> list[str]:
    """bwrap's argv for ``pol`` with no network at all."""
    return bwrap.argv(
        replace(pol, network="none"),
        list(command),
        bwrap=path or "bwrap",
        term_env=env_path,
        root=os.getuid() == 0,
        sizes=bwrap.sized(version),
    )


def user_net(
    ports: str, which: Callable[[str], str | None] = shutil.which
) -> tuple[str | None, str]:
    """The helper that gives the Run a network of its own (pasta, else
    slirp4netns when no host port must be forwarded: it cannot), or None
    and why not, with the command that fixes it."""
    pasta = which("pasta")
    if pasta is not None:
        return pasta, ""
    slirp = which("slirp4netns")
    if slirp is None:
        return None, "no user-mode networking (sudo apt install passt)"
    if ports != "-":
        return None, (
            f"slirp4netns cannot forward the host's 127.0.0.1 ports ({ports}) "
            "(sudo apt install passt)"
        )
    return slirp, ""
