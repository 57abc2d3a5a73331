"""One Run's agent command wrapped in its sandbox, with the label the views show.

The glue between the facts of a Run (its worktree, its project's git directory,
Owl's folders, the agent's environment) and ``policy`` / ``bwrap`` / ``netns``.
Reads two small files of the worktree (``.git`` and the admin folder's
``commondir``); runs no git.
"""

from __future__ import annotations

import os
import pwd
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import bwrap, policy

NETNS = str(Path(__file__).with_name("netns.py"))


@dataclass(frozen=True)
class Wrapped:
    argv: list[str]
    label: str  # "contained: bwrap 0.8, own network" / "not contained: ..."
    contained: bool


def git_dirs(worktree: str) -> tuple[str | None, str | None]:
    """(the project's git directory, the worktree's admin folder) from the files."""
    try:
        text = Path(worktree, ".git").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None, None
    if not text.startswith("gitdir:"):
        return None, None
    admin = os.path.normpath(os.path.join(worktree, text[7:].strip()))
    try:
        common = Path(admin, "commondir").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None, admin
    return os.path.normpath(os.path.join(admin, common)), admin


def wrap(
    command: Sequence[str],
    *,
    settings: policy.Settings,
    agent: str,
    env: Mapping[str, str],
    worktree: str,
    project: str,
    owl_dirs: Sequence[str],
    which: Callable[[str], str | None] = shutil.which,
) -> Wrapped:
    """``command`` as it starts inside the Run's sandbox, or as it is with why not.
    ``which`` finds the network helpers (pasta, slirp4netns)."""
    if settings.mode == "off":
        return Wrapped(list(command), 'not contained: sandbox.mode = "off"', False)
    why = bwrap.probe()
    if why is not None:
        return Wrapped(list(command), f"not contained: {why}", False)
    path, version = bwrap.find()
    common, admin = git_dirs(worktree)
    home = env.get("HOME") or os.path.expanduser("~")
    own = policy.AGENTS.get(agent, policy.AgentState())
    facts = policy.Facts(
        home=home,
        user_home=pwd.getpwuid(os.getuid()).pw_dir,
        worktree=worktree,
        git_common=common,
        git_admin=admin,
        project=project,
        owl_home=tuple(owl_dirs),
        runtime_dir=env.get("XDG_RUNTIME_DIR") or None,
        env=env,
        config_ports=config_ports(own.url_files, home, env),
    )
    make_folders(own.folders, home, env)
    pol = policy.compute(settings, own, facts)
    env_path = bwrap.term_env()
    argv = bwrap.argv(pol, list(command), bwrap=path or "bwrap", term_env=env_path)
    if pol.network == "none":
        return Wrapped(
            bwrap.ignoring_term(argv, env_path), f"contained: bwrap {version}, no network", True
        )
    ports = ",".join(str(p) for p in pol.host_ports) or "-"
    helper, why_not = user_net(ports, which)
    if helper is None:
        # bwrap.argv shares the host's network unless told "none"
        return Wrapped(
            bwrap.ignoring_term(argv, env_path),
            f"contained: bwrap {version}; the X server stays reachable: {why_not}",
            True,
        )
    how = "" if os.path.basename(helper) == "pasta" else f" ({os.path.basename(helper)})"
    return Wrapped(
        [sys.executable, "-I", "-S", NETNS, helper, ports, "--", *argv],
        f"contained: bwrap {version}, own network{how}",
        True,
    )


def config_ports(files: Sequence[str], home: str, env: Mapping[str, str]) -> tuple[int, ...]:
    """The 127.0.0.1 ports the agent's own config files name (its model's
    URL), each file read as text up to `policy.TEXT_MAX`; one that cannot be
    read names none."""
    ports: list[int] = []
    for name in files:
        path = policy.expand(name, home, env)
        if not path:
            continue
        try:
            with open(path, "rb") as f:
                text = f.read(policy.TEXT_MAX).decode("utf-8", "replace")
        except OSError:
            continue
        ports += [p for p in policy.loopback_ports_in(text) if p not in ports]
    return tuple(sorted(ports))


def make_folders(folders: Sequence[str], home: str, env: Mapping[str, str]) -> None:
    """Make the agent's own state folders that are missing (as the agent itself
    would on its first start), so that they can be bound writable; one that
    cannot be made is left out of the sandbox, as before."""
    for folder in folders:
        path = policy.expand(folder, home, env)
        if path:
            try:
                os.makedirs(path, mode=0o700, exist_ok=True)
            except OSError:
                pass


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
