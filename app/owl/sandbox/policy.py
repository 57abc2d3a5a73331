"""What a contained Run may reach, as one value computed from the settings alone.

Pure: no file is read, no process started. The caller hands over the facts
(the homes, the worktree, the project's git directory, the agent's environment)
and gets a ``Policy`` that ``bwrap.py`` turns into an argv and ``seatbelt.py``
into a macOS profile, so both read the same decisions.

The shape of the decisions:
- the filesystem is read-only, and with ``read = "project"`` only the system's
  own folders, the project and what is named are readable at all;
- writable: the Job's worktree, what ``git commit`` there needs of the Job's own
  git store (``owl.git.jobstore``: its objects, refs, logs, the worktree's admin
  folder), the agent's own state, caches and ``sandbox.write``; the store's top
  (``config``, ``hooks/``, ``info/``, ``packed-refs``) is read-only, and so is
  the whole of the project's own git folder: its history is out of reach;
- hidden (empty): the well-known secrets of a home, Owl's own home (all but this
  Job's worktree and its store), the desktop's runtime folder and X11 sockets;
- no host unix socket answers: ``/run`` (and ``/var/run``) are empty folders
  of the Run's own, keeping only their symlinks and the resolver's file, and
  every other socket the host has bound where the Run could see it is covered
  by /dev/null, but for those ``sandbox.sockets`` opens on purpose;
- the environment keeps no display, no way back to Owl and no secret the agent
  was not meant to have; it is the environment of the sandbox's own processes
  too, so none shows more in its /proc/PID/environ.

Its parts, each pure: ``folders`` (the home's secrets, caches and toolchains,
the system's folders), ``agentstate`` (each agent's own), ``envplan`` (the
environment), and ``hostsockets.masked_sockets`` (of the host's sockets found
before, those the Run would still see).
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .agentstate import AgentState
from .envplan import env_plan, loopback_ports
from .folders import (
    DEFAULT_CACHES,
    HOME_SECRETS,
    HOME_TOOLCHAINS,
    MACOS_HOME_SECRETS,
    SYSTEM_HIDDEN,
    expand,
)
from .hostsockets import masked_sockets

MODES = ("auto", "required", "off")
# On Linux a Run that cannot be contained does not start unless the person
# wrote otherwise ("auto" falls back, "off" never contains); on macOS, where
# the Seatbelt profile has not run yet, Runs start uncontained, saying so.
DEFAULT_MODE = "required" if sys.platform.startswith("linux") else "auto"
READS = ("home", "project")

# A size a Run's /tmp and /dev/shm may not pass (`sandbox.tmp_size`): without
# one, a tmpfs may take half of the machine's memory.
DEFAULT_TMP_SIZE = 1 << 30


@dataclass(frozen=True)
class Settings:
    """The ``[sandbox]`` table as checked (see ``keys.py``), merged for one Run."""

    mode: str = DEFAULT_MODE
    read: str = "home"
    read_also: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    env_keep: tuple[str, ...] = ()
    network: bool = True
    caches: tuple[str, ...] = DEFAULT_CACHES
    host_ports: tuple[int, ...] = ()
    sockets: tuple[str, ...] = ()  # host unix sockets opened on purpose
    tmp_size: int = DEFAULT_TMP_SIZE  # bytes, for /tmp and for /dev/shm

    def narrowed(self, project: Mapping[str, object]) -> Settings:
        """A project's ``.owl.toml`` ``[sandbox]``: it may only take away.

        ``read = "project"`` narrows ``"home"``; ``hide`` adds; ``network =
        false`` cuts; ``mode = "required"`` hardens ``"auto"``. Nothing it says
        can widen what the person's config allows (``"off"`` stays off: the
        person chose it)."""
        out = self
        if project.get("read") == "project":
            out = _replace(out, read="project")
        hide = project.get("hide")
        if isinstance(hide, (list, tuple)):
            out = _replace(out, hide=(*out.hide, *(str(h) for h in hide)))
        if project.get("network") is False:
            out = _replace(out, network=False)
        if project.get("mode") == "required" and out.mode == "auto":
            out = _replace(out, mode="required")
        return out

    def for_agent(self, table: Mapping[str, object]) -> Settings:
        """``[agents.NAME.sandbox]``: the person's own words for one agent."""
        out = self
        for key in ("write", "hide", "env_keep", "read_also", "sockets"):
            more = table.get(key)
            if isinstance(more, (list, tuple)):
                out = _replace(out, **{key: (*getattr(out, key), *(str(m) for m in more))})
        if isinstance(table.get("network"), bool):
            out = _replace(out, network=bool(table["network"]))
        if table.get("mode") in MODES:
            out = _replace(out, mode=str(table["mode"]))
        return out


def _replace(s: Settings, **kw: object) -> Settings:
    from dataclasses import replace

    return replace(s, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Facts:
    """Where things are for this Run; gathered by the caller (``contain.py``)."""

    home: str  # HOME as the agent will see it
    user_home: str  # the account's own home (may differ in tests)
    worktree: str
    git_common: str | None  # the Job's own git store (worktrees/job-N.git), from Owl's records
    git_admin: str | None  # the worktree's admin folder (…/job-N.git/worktrees/job-N)
    project: str
    owl_home: tuple[str, ...]  # Owl's folders: config, data, state, logs
    runtime_dir: str | None  # XDG_RUNTIME_DIR
    env: Mapping[str, str] = field(default_factory=dict)  # the agent's environment
    # Of hostsockets.PRIVATE_SYSTEM, the real folders (not a symlink to another): each an empty one inside.
    private: tuple[str, ...] = ()
    # What of those folders the Run keeps: their symlinks (a system's own
    # paths, as NixOS keeps /run/current-system), as (path, target) ...
    private_links: tuple[tuple[str, str], ...] = ()
    # ... and files read through a path that leads there (/etc/resolv.conf's
    # target, /run/systemd/resolve/stub-resolv.conf): read-only, never a socket.
    private_files: tuple[str, ...] = ()
    # The host's bound unix sockets (their paths resolved), from the socket
    # tables of every network namespace in sight (`hostsockets`).
    host_sockets: tuple[str, ...] = ()
    project_git: str | None = None  # the project's own git folder: read only


@dataclass(frozen=True)
class Policy:
    """One Run's reach, in the order the mounts must be laid."""

    read_root: str  # "home": all of / read-only; "project": folders.SYSTEM_READ
    readable: tuple[str, ...]  # read-only binds over the root (project, homes...)
    hidden: tuple[str, ...]  # empty folders / /dev/null files
    writable: tuple[str, ...]  # read-write binds
    readonly_over: tuple[str, ...]  # read-only binds laid over the writable ones
    env_unset: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    network: str  # "own" (user-mode networking) | "none"
    host_ports: tuple[int, ...]  # 127.0.0.1 ports of the host kept reachable
    worktree: str = ""
    private: tuple[str, ...] = ()  # system folders seen empty (hostsockets.PRIVATE_SYSTEM)
    private_links: tuple[tuple[str, str], ...] = ()  # symlinks kept in them
    private_files: tuple[str, ...] = ()  # files kept in them, read-only
    masked: tuple[str, ...] = ()  # host sockets out of reach: /dev/null laid over each
    sockets: tuple[str, ...] = ()  # host sockets opened on purpose (`sandbox.sockets`)
    tmp_size: int = DEFAULT_TMP_SIZE
    # read-only binds laid after the hidden ones and before the writable: the
    # Job's git store, which lies in Owl's hidden folder
    revealed: tuple[str, ...] = ()
    # of those, the ones whose top is a folder of the Run's own (a tmpfs) with
    # every entry bound read-only in it: the Job's store, where git creates
    # `packed-refs.lock` to delete any ref (git 2.47: on every commit, for
    # AUTO_MERGE) and may write nothing that lasts; whatever the Run makes
    # there is gone with it, and packed-refs, config, HEAD and hooks stay Owl's
    scratch_top: tuple[str, ...] = ()


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for p in paths:
        if p and p not in out:
            out.append(p)
    return tuple(out)


def agent_env(env: Mapping[str, str], policy: Policy) -> dict[str, str]:
    """The environment the Run starts with, its sandbox's own processes and
    the agent alike (so no /proc/PID/environ inside holds more than the agent's)."""
    out = {k: v for k, v in env.items() if k not in set(policy.env_unset)}
    out.update(policy.env_set)
    return out


def compute(settings: Settings, agent: AgentState, facts: Facts) -> Policy:
    """The Policy for one Run: see the module's docstring for its shape."""
    homes = _unique((facts.home, facts.user_home))
    env = facts.env

    def ex(paths: Iterable[str]) -> tuple[str, ...]:
        return _unique(expand(p, facts.home, env) for p in paths)

    state = ex(agent.state)
    caches = ex(settings.caches)
    extra_write = ex(settings.write)
    readable = (
        [facts.project, *homes]
        if settings.read == "home"
        else [facts.project, *ex(HOME_TOOLCHAINS)]
    )
    readable += list(ex(settings.read_also))
    if facts.project_git:
        readable.append(facts.project_git)

    hidden = [posixpath.join(h, s) for h in homes for s in (*HOME_SECRETS, *MACOS_HOME_SECRETS)]
    hidden += list(ex(settings.hide))
    hidden += list(facts.owl_home)
    if facts.runtime_dir:
        hidden.append(facts.runtime_dir)
    hidden += SYSTEM_HIDDEN
    # Nothing the Run must write is hidden from it (a cache inside an Owl folder...).
    writable = [facts.worktree]
    readonly_over: list[str] = []
    revealed: list[str] = []
    if facts.git_common:
        g = facts.git_common
        revealed.append(g)
        writable += [posixpath.join(g, d) for d in ("objects", "refs", "logs")]
        if facts.git_admin:
            writable.append(facts.git_admin)
    writable += [*state, *caches, *extra_write]
    readonly_over += list(ex(agent.fixed))
    if facts.project_git:
        # laid over the writable ones too: a `sandbox.write` that holds the
        # project (`~`, `~/code`) must not open its history to the Run
        readonly_over.append(facts.project_git)
    hidden = [h for h in _unique(hidden) if h not in writable and h not in revealed]

    drop, set_ = env_plan(env, (*agent.env_keep, *settings.env_keep), facts.runtime_dir)
    ports = _unique([str(p) for p in (*loopback_ports(env), *settings.host_ports)])
    sockets = ex(settings.sockets)
    covered = (*facts.private, "/tmp", "/dev/shm", *hidden)
    return Policy(
        read_root=settings.read,
        readable=_unique(readable),
        hidden=tuple(hidden),
        writable=_unique(writable),
        readonly_over=_unique(readonly_over),
        env_unset=drop,
        env_set=set_,
        network="own" if settings.network else "none",
        host_ports=tuple(sorted(int(p) for p in ports)),
        worktree=facts.worktree,
        private=facts.private,
        private_links=facts.private_links,
        private_files=facts.private_files,
        masked=masked_sockets(facts.host_sockets, covered, sockets),
        sockets=sockets,
        tmp_size=settings.tmp_size,
        revealed=_unique(revealed),
        scratch_top=(facts.git_common,) if facts.git_common else (),
    )
