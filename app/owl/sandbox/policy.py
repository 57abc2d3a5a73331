"""What a contained Run may reach, as one value computed from the settings alone.

Pure: no file is read, no process started. The caller hands over the facts
(the homes, the worktree, the project's git directory, the agent's environment,
the Run's own places Owl made: ``ownhome``) and gets a ``Policy`` that
``bwrap.py`` turns into an argv and ``seatbelt.py`` into a macOS profile.

The view is an allow-list, never the person's filesystem minus a list:
- read-only: the system's own folders (``folders.SYSTEM_READ``), the
  project and its git folder, the toolchains of the person's home
  (``folders.HOME_TOOLCHAINS``, the agent's program and the folders of its
  ``PATH`` that are not the system's), a copy of ``~/.gitconfig`` without what
  could reach a secret or run a program (``gitconfig``), and ``sandbox.read``;
- its own: ``/tmp``, ``/dev/shm``, ``/var`` (with ``/var/tmp``) and ``/run``
  (keeping only their symlinks and the resolver's file), and a **home of its
  own** at the person's ``$HOME`` path, with its caches (per project) and its
  agent's state (per agent and project) bound in;
- writable: the home of its own, the Job's worktree, what ``git commit``
  there needs of the Job's own git store (``owl.git.jobstore``), and
  ``sandbox.write``; the store's top and the project's git folder are
  read-only;
- hidden, laid last so that nothing laid before reveals them: the home's
  secrets, Owl's own folders, the desktop's runtime folder and
  ``sandbox.hide``, wherever a folder the Run sees holds one;
- no host unix socket answers: the Run may make no unix socket (the seccomp
  filter, ``syscalls``) unless ``sandbox.sockets`` opens them (host sockets
  it names, or ``"own"``: the Run's own); then no folder a socket of the
  host's appears in later is in the view but those it sees (the project's),
  where the ones bound when the Run starts are covered by /dev/null, but for
  those ``sandbox.sockets`` names;
- the environment keeps no display, no way back to Owl and no secret the agent
  was not meant to have.

Its parts, each pure: ``folders`` (the lists), ``agentstate`` (each agent's
own), ``envplan`` (the environment), and ``hostsockets.masked_sockets``.
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .agentstate import AgentState
from .allowlist import REGISTRIES
from .envplan import env_plan, loopback_ports
from .folders import (
    DEFAULT_CACHES,
    HOME_CREDENTIALS,
    HOME_SECRETS,
    HOME_TOOLCHAINS,
    MACOS_HOME_SECRETS,
    SYSTEM_HIDDEN,
    expand,
    system,
    under,
)
from .hostsockets import masked_sockets

MODES = ("auto", "required", "off")
# On Linux a Run that cannot be contained does not start unless the person
# wrote otherwise ("auto" falls back, "off" never contains); on macOS, where
# the Seatbelt profile has not run yet, Runs start uncontained, saying so.
DEFAULT_MODE = "required" if sys.platform.startswith("linux") else "auto"
# `read` as a word, as configs before the own home wrote it: both now mean
# the allow-listed view (`keys.notes` says so); a list names folders to read.
READS = ("home", "project")

# `sandbox.sockets`'s word for the Run's own unix sockets (made and used
# inside: a project's tests that run Postgres or Redis on a socket in /tmp).
OWN_SOCKETS = "own"

# A size a Run's /tmp and /dev/shm may not pass (`sandbox.tmp_size`): without
# one, a tmpfs may take half of the machine's memory.
DEFAULT_TMP_SIZE = 1 << 30


@dataclass(frozen=True)
class Settings:
    """The ``[sandbox]`` table as checked (see ``keys.py``), merged for one Run."""

    mode: str = DEFAULT_MODE
    read: tuple[str, ...] = ()  # more of the person's folders to read
    read_also: tuple[str, ...] = ()  # the older name of the same
    write: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    env_keep: tuple[str, ...] = ()
    network: bool = True
    # network = "allow": only these hosts, through a proxy outside the Run
    allow: bool = False
    allow_hosts: tuple[str, ...] = REGISTRIES
    caches: tuple[str, ...] = DEFAULT_CACHES
    host_ports: tuple[int, ...] = ()
    sockets: tuple[str, ...] = ()  # host unix sockets opened on purpose, or "own"
    tmp_size: int = DEFAULT_TMP_SIZE  # bytes, for /tmp and for /dev/shm

    def __post_init__(self) -> None:
        if isinstance(self.read, str):  # the older word, as `read = "project"` was: none
            object.__setattr__(self, "read", ())

    def narrowed(self, project: Mapping[str, object]) -> Settings:
        """A project's ``.owl.toml`` ``[sandbox]``: it may only take away.

        ``read = "project"`` drops what ``sandbox.read`` adds; ``hide`` adds;
        ``network = false`` (or ``"none"``) cuts, ``"allow"`` holds an own
        network to its allow-list; ``mode = "required"`` hardens ``"auto"``.
        Nothing it says can widen what the person's config allows (``"off"``
        stays off: the person chose it)."""
        out = self
        if project.get("read") == "project":
            out = _replace(out, read=(), read_also=())
        hide = project.get("hide")
        if isinstance(hide, (list, tuple)):
            out = _replace(out, hide=(*out.hide, *(str(h) for h in hide)))
        if project.get("network") in (False, "none"):
            out = _replace(out, network=False)
        elif project.get("network") == "allow":
            out = _replace(out, allow=True)
        if project.get("mode") == "required" and out.mode == "auto":
            out = _replace(out, mode="required")
        return out

    def for_agent(self, table: Mapping[str, object]) -> Settings:
        """``[agents.NAME.sandbox]``: the person's own words for one agent."""
        out = self
        for key in ("write", "hide", "env_keep", "read", "read_also", "sockets"):
            more = table.get(key)
            if isinstance(more, (list, tuple)):
                out = _replace(out, **{key: (*getattr(out, key), *(str(m) for m in more))})
        net = table.get("network")
        if isinstance(net, bool) or net in ("own", "none", "allow"):
            out = _replace(out, network=net not in (False, "none"), allow=net == "allow")
        more = table.get("allow_hosts")
        if isinstance(more, (list, tuple)):
            out = _replace(out, allow_hosts=(*out.allow_hosts, *(str(h) for h in more)))
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
    # The Run's own places Owl made (``ownhome``): its home's folder, bound at
    # ``home``, and what is bound into it (source, place, writable).
    own_home: str | None = None
    own_binds: tuple[tuple[str, str, bool], ...] = ()
    # Folders outside the system's the Run's programs live in (the agent's
    # install, its PATH's): read-only. A file where its folder holds more.
    programs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    """One Run's reach, in the order the mounts must be laid."""

    read_root: str  # "own": folders.SYSTEM_READ and the allow-list below
    readable: tuple[str, ...]  # read-only binds over the root (project, homes...)
    hidden: tuple[str, ...]  # empty folders / /dev/null files
    writable: tuple[str, ...]  # read-write binds
    readonly_over: tuple[str, ...]  # read-only binds laid over the writable ones
    env_unset: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    network: str  # "own" (user-mode networking) | "allow" (through the allow-list) | "none"
    host_ports: tuple[int, ...]  # 127.0.0.1 ports of the host kept reachable
    worktree: str = ""
    private: tuple[str, ...] = ()  # system folders seen empty (hostsockets.PRIVATE_SYSTEM)
    private_links: tuple[tuple[str, str], ...] = ()  # symlinks kept in them
    private_files: tuple[str, ...] = ()  # files kept in them, read-only
    masked: tuple[str, ...] = ()  # host sockets out of reach: /dev/null laid over each
    sockets: tuple[str, ...] = ()  # host sockets opened on purpose (`sandbox.sockets`)
    own_sockets: bool = False  # the Run may make unix sockets of its own (`"own"`)
    tmp_size: int = DEFAULT_TMP_SIZE
    # read-only binds laid before the writable: the Job's git store
    revealed: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()  # network "allow": the hosts the proxy lets through
    home: str = ""  # the person's $HOME path, where the Run's own home is bound
    own_home: str = ""  # the folder of Owl's bound there
    own_binds: tuple[tuple[str, str, bool], ...] = ()  # (source, place, writable) into it
    # of those, the ones whose top is a folder of the Run's own (a tmpfs) with
    # every entry bound read-only in it: the Job's store, where git creates
    # `packed-refs.lock` to delete any ref (git 2.47: on every commit, for
    # AUTO_MERGE) and may write nothing that lasts; whatever the Run makes
    # there is gone with it, and packed-refs, config, HEAD and hooks stay Owl's
    scratch_top: tuple[str, ...] = ()

    @property
    def unix(self) -> bool:
        """Whether the Run may make unix sockets: ``sandbox.sockets`` opens
        some (it names host sockets, or says "own"); else the filter refuses them."""
        return self.own_sockets or bool(self.sockets)

    def sockets_words(self) -> str:
        """What ``sandbox.sockets`` opens, as the views say it: "none", "own",
        "own and /run/docker.sock"."""
        names = [*([OWN_SOCKETS] if self.own_sockets else []), *self.sockets]
        if len(names) < 2:
            return names[0] if names else "none"
        return ", ".join(names[:-1]) + " and " + names[-1]


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

    def ex(paths: Iterable[str], home: str = facts.home) -> tuple[str, ...]:
        return _unique(expand(p, home, env) for p in paths)

    toolchains = [t for h in homes for t in ex(HOME_TOOLCHAINS, h)]
    readable = [facts.project, *toolchains, *facts.programs]
    readable += list(ex((*settings.read, *settings.read_also)))
    if facts.project_git:
        readable.append(facts.project_git)

    writable = [facts.worktree]
    readonly_over: list[str] = []
    revealed: list[str] = []
    if facts.git_common:
        g = facts.git_common
        revealed.append(g)
        writable += [posixpath.join(g, d) for d in ("objects", "refs", "logs")]
        if facts.git_admin:
            writable.append(facts.git_admin)
    writable += list(ex(settings.write))
    if facts.project_git:
        # laid over the writable ones too: a `sandbox.write` that holds the
        # project must not open its history to the Run
        readonly_over.append(facts.project_git)

    # What would be hidden, wherever a folder of the person's the Run sees holds it.
    names = (*HOME_SECRETS, *HOME_CREDENTIALS, *MACOS_HOME_SECRETS)
    secret = [posixpath.join(h, s) for h in homes for s in names]
    secret += [*ex(settings.hide), *facts.owl_home, *SYSTEM_HIDDEN]
    if facts.runtime_dir:
        secret.append(facts.runtime_dir)
    seen = [*readable, *writable, *readonly_over]
    mine = {facts.worktree, *revealed, *writable[1:]} if facts.git_common else {facts.worktree}
    hidden = [
        h
        for h in _unique(secret)
        if h not in mine
        and not any(under(m, h) for m in mine)  # Owl's folder holding the worktree
        and any(under(h, v) and not system(v) for v in seen)
    ]

    drop, set_ = env_plan(env, (*agent.env_keep, *settings.env_keep), facts.runtime_dir)
    ports = _unique([str(p) for p in (*loopback_ports(env), *settings.host_ports)])
    sockets = ex(s for s in settings.sockets if s != OWN_SOCKETS)
    host_seen = [p for p in (*readable, *writable) if not system(p)]
    return Policy(
        read_root="own",
        readable=_unique(readable),
        hidden=tuple(hidden),
        writable=_unique(writable),
        readonly_over=_unique(readonly_over),
        env_unset=drop,
        env_set=set_,
        network=("allow" if settings.allow else "own") if settings.network else "none",
        host_ports=tuple(sorted(int(p) for p in ports)),
        worktree=facts.worktree,
        private=facts.private,
        private_links=facts.private_links,
        private_files=facts.private_files,
        masked=_in_sight(masked_sockets(facts.host_sockets, hidden, sockets), host_seen),
        sockets=sockets,
        own_sockets=OWN_SOCKETS in settings.sockets,
        tmp_size=settings.tmp_size,
        revealed=_unique(revealed),
        allow_hosts=settings.allow_hosts if settings.network and settings.allow else (),
        scratch_top=(facts.git_common,) if facts.git_common else (),
        home=facts.home if facts.own_home else "",
        own_home=facts.own_home or "",
        own_binds=facts.own_binds,
    )


def _in_sight(sockets: Iterable[str], seen: Iterable[str]) -> tuple[str, ...]:
    """Of the host's sockets, those in a folder of the host's the Run sees:
    every other one lies where the Run has a folder of its own, or none."""
    places = tuple(seen)
    return tuple(s for s in sockets if any(under(s, p) for p in places))
