"""One Run's agent command wrapped in its sandbox, with the label the views show.

The glue between the facts of a Run (its worktree, its project's git directory,
Owl's folders, the agent's environment) and ``policy`` / ``bwrap`` / ``netns``.
The git places come from Owl's records (``GitPlaces``): no file of the worktree
is read, since the agent writes them. Reads the host's lists of bound unix
sockets, its own network namespace's and the others' (``hostsockets``, about
1 ms), and the top of ``/run``; runs no git.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from owl.tree import pyhelper

from . import (
    agentconf,
    agentstate,
    allowlist,
    bwrap,
    folders,
    hostsockets,
    mactemp,
    macview,
    ownhome,
    policy,
    ready,
    seatbelt,
    seatexec,
    syscalls,
)

NETNS = str(Path(__file__).with_name("netns.py"))


@dataclass(frozen=True)
class Wrapped:
    argv: list[str]
    label: str  # "contained: bwrap 0.8, own network" / "not contained: ..."
    contained: bool
    # What `argv` starts with: contained, the agent's own environment (the
    # sandbox's processes, bwrap's pid 1 inside among them, carry no more).
    env: dict[str, str]
    # The host's sockets /dev/null is laid over: one that goes away between
    # their reading and bwrap's start fails the start (see `owl.sandbox.raced`).
    masked: tuple[str, ...] = ()
    # The names of the variables kept out of its environment (never a value):
    # `owl status --json` lists them, so a person sees what the Run went without.
    dropped: tuple[str, ...] = ()
    # Not to start at all, whatever `sandbox.mode` says (a credential Owl holds
    # that may not be used): uncontained would not mend it.
    refused: bool = False
    # Where the Run's own writable places are on the host (``ownhome``): (the
    # place at the person's home path, Owl's folder or file bound there on
    # Linux, linked there from the Run's own home on macOS), the agent's
    # state among them. Empty for a Run not contained.
    kept: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class GitPlaces:
    """Where the Run's git lives, as Owl recorded it (``owl.git.jobstore.Places``):
    the Job's store and the worktree's admin folder in it (writable parts), and
    the project's own git folder (read only). Never read from the worktree's
    files, which the agent writes."""

    store: str | None = None
    admin: str | None = None
    project_git: str | None = None


def wrap(
    command: Sequence[str],
    *,
    settings: policy.Settings,
    agent: str,
    env: Mapping[str, str],
    worktree: str,
    project: str,
    owl_dirs: Sequence[str],
    git: GitPlaces | None = None,
    which: Callable[[str], str | None] = shutil.which,
    net_report: str | None = None,
    setup_report: str | None = None,
    keep: str | None = None,
    held: str | None = None,
) -> Wrapped:
    """``command`` as it starts inside the Run's sandbox, or as it is with why not.
    ``which`` finds the network helpers (pasta, slirp4netns); ``net_report``: a
    file the network helper says in whether the Run got its network (see netns.py);
    ``setup_report``: one written when bwrap fails at its own start (netns.py);
    ``keep``: Owl's folder for the Runs' own homes, caches and agent state
    (``ownhome``); ``held``: Owl's folder of headless credentials, one file per agent."""
    if settings.mode == "off":
        return Wrapped(list(command), 'not contained: sandbox.mode = "off"', False, dict(env))
    keep = keep or os.path.join(os.path.dirname(worktree), ".sandbox")
    if sys.platform == "darwin":
        try:
            env = with_held(env, agent, held)
        except ownhome.TokenProblem as e:
            return Wrapped(list(command), f"not started: {e}", False, dict(env), refused=True)
        where = Where(worktree, project, tuple(owl_dirs), git or GitPlaces(), keep)
        return wrap_darwin(command, settings, agent, env, where)
    why = ready.problem()  # the last probe's answer, with what fixes it
    if why is not None:
        return Wrapped(list(command), f"not contained: {why}", False, dict(env))
    path, version = bwrap.find()
    git = git or GitPlaces()
    try:
        env = with_held(env, agent, held)
    except ownhome.TokenProblem as e:
        return Wrapped(list(command), f"not started: {e}", False, dict(env), refused=True)
    private, links, files = hostsockets.private_system(
        (*folders.SYSTEM_OWN, *hostsockets.PRIVATE_SYSTEM)
    )
    facts = replace(
        gather(env, worktree, project, owl_dirs, git, str),  # the places as given
        runtime_dir=env.get("XDG_RUNTIME_DIR") or None,
        private=private,
        private_links=links,
        private_files=files,
        # every socket but those of folders the Run never sees from the host:
        # a project or a `sandbox.read` folder may lie under /tmp or /var
        host_sockets=hostsockets.host_sockets(
            skip=(*(p for p in private if p not in folders.SYSTEM_OWN), "/dev/shm")
        ),
        programs=programs(command, env),
    )
    try:
        pol = decide(settings, agent, env, facts, keep)
    except OSError as e:
        return Wrapped(
            list(command), f"not contained: its own home cannot be made: {e}", False, dict(env)
        )
    env_path = bwrap.term_env()
    argv = bwrap.argv(
        pol,
        list(command),
        bwrap=path or "bwrap",
        term_env=env_path,
        root=os.getuid() == 0,
        sizes=bwrap.sized(version),
    )
    inside = policy.agent_env(env, pol)
    filt = syscalls.bpf(pol.unix)  # built once, at the daemon's start (bwrap.probe)
    if isinstance(filt, str):  # no filter: what stands is the masks laid at the start
        opened = f"; unix sockets: {pol.sockets_words()}" if pol.unix else ""
        opened += f"; {filt}"
    else:
        opened = f"; unix sockets: {pol.sockets_words()}"
    own = [*seccomp(filt), *(["--setup", setup_report] if setup_report else [])]
    if signing(git.project_git, facts.home):
        # the keys are out of the Run's reach; owl jobs accept signs (owl.review.signing)
        opened += "; commits unsigned here, signed at accept (commit.gpgSign)"
    if pol.network == "none":
        return Wrapped(
            alone(argv, own),
            f"contained: bwrap {version}, no network{opened}",
            True,
            inside,
            tuple(pol.masked),
            pol.env_unset,
            kept=kept_places(pol),
        )
    ports = ",".join(str(p) for p in pol.host_ports) or "-"
    allow = pol.network == "allow"
    helper, why_not = user_net("allow" if allow else ports, which)
    if helper is None and allow:  # never the host's network in its place
        return Wrapped(
            alone(argv_none(pol, command, path, env_path, version), own),
            f"contained: bwrap {version}, no network: the allow-list needs pasta "
            f"(sudo apt install passt){opened}",
            True,
            inside,
            tuple(pol.masked),
            pol.env_unset,
            kept=kept_places(pol),
        )
    if helper is None:
        # bwrap.argv shares the host's network unless told "none"
        return Wrapped(
            alone(argv, own),
            f"contained: bwrap {version}; the X server stays reachable: {why_not}{opened}",
            True,
            inside,
            tuple(pol.masked),
            pol.env_unset,
            kept=kept_places(pol),
        )
    how = "" if os.path.basename(helper) == "pasta" else f" ({os.path.basename(helper)})"
    report = ["--report", net_report] if net_report else []
    net = f"own network{how}"
    if allow:
        report += ["--allow", ",".join(pol.allow_hosts)]
        n = len(pol.allow_hosts)
        net = f"network: allow-list ({n} host{'' if n == 1 else 's'})"
    return Wrapped(
        [sys.executable, "-I", "-S", NETNS, helper, ports, *report, *own, "--", *argv],
        f"contained: bwrap {version}, {net}{opened}",
        True,
        inside,
        tuple(pol.masked),
        pol.env_unset,
        kept=kept_places(pol),
    )


def kept_places(pol: policy.Policy) -> tuple[tuple[str, str], ...]:
    """The Run's own writable places, each as (where the Run sees it, where it
    is on the host): what the Run's agent left there is read on the host."""
    return tuple((place, source) for source, place, writable in pol.own_binds if writable)


def gather(
    env: Mapping[str, str],
    worktree: str,
    project: str,
    owl_dirs: Sequence[str],
    git: GitPlaces,
    path: Callable[[str], str],
) -> policy.Facts:
    """The facts every sandbox takes alike (the homes, the Run's places, Owl's
    folders), each place as ``path`` makes it (macOS: resolved); what only
    one sandbox knows (Linux's /run and host sockets) is added by its caller."""

    def place(p: str | None) -> str | None:
        return path(p) if p else None

    return policy.Facts(
        home=env.get("HOME") or os.path.expanduser("~"),
        user_home=pwd.getpwuid(os.getuid()).pw_dir,
        worktree=path(worktree),
        git_common=place(git.store),
        git_admin=place(git.admin),
        project=path(project),
        owl_home=tuple(path(d) for d in owl_dirs),
        runtime_dir=None,
        env=env,
        project_git=place(git.project_git),
    )


def decide(
    settings: policy.Settings,
    agent: str,
    env: Mapping[str, str],
    facts: policy.Facts,
    keep: str,
    lay: Callable[[ownhome.Own, policy.Policy, str], None] | None = None,
) -> policy.Policy:
    """The Run's Policy, for either sandbox, and the port and key its
    provider's setup names passed on (read from the person's own files, which
    no Run writes). The Run's own home, its project's caches and its agent's
    state made under ``keep`` first (``ownhome``), then laid out by ``lay``
    (Linux: every place a bind is laid in that home made or mended, no link
    followed, ``mend_binds``; macOS: ``macview.link_places``)."""
    home = facts.home
    state = agentstate.AGENTS.get(agent, agentstate.AgentState())
    said = agentconf.needs(agent, home, env)  # its provider's port and key, from its own files
    settings = replace(
        settings,
        host_ports=(*settings.host_ports, *said.ports),
        env_keep=(*settings.env_keep, *said.env_keep),
        allow_hosts=allowlist.hosts(agent, env, settings.allow_hosts),
        read=(*settings.read, *said.reads),
    )
    caches = [c for c in settings.caches if wanted_cache(c, env)]
    own = ownhome.make(
        keep, os.path.basename(facts.worktree), facts.project, home, env, caches, agent, state
    )
    facts = replace(facts, own_home=own.home, own_binds=own.binds)
    pol = policy.compute(settings, state, facts)
    (lay or mend_binds)(own, pol, home)
    return pol


def mend_binds(own: ownhome.Own, pol: policy.Policy, home: str) -> None:
    """Linux: every place bwrap lays a bind at inside the Run's own home made
    or mended, so that it finds real folders all the way, never a link."""
    ownhome.mend_places(own, home, bwrap.places_in(pol, home))


def wanted_cache(cache: str, env: Mapping[str, str]) -> bool:
    """A default cache only where its tool is on the agent's PATH."""
    tools = CACHE_TOOLS.get(cache)
    return tools is None or any(_on_path(t, env.get("PATH", os.defpath)) for t in tools)


def with_held(env: Mapping[str, str], agent: str, held: str | None) -> Mapping[str, str]:
    """The agent's environment with the headless credential Owl holds for it
    (``ownhome.held_token``) in its variable, unless the variable is set."""
    name = agentstate.AGENTS.get(agent, agentstate.AgentState()).token_env
    if held is None or name is None or env.get(name):
        return env
    token = ownhome.held_token(held, agent)
    return env if token is None else {**env, name: token}


def programs(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The folders outside the system's that the Run's programs live in,
    read-only inside: the command's own (its install: the folder above a
    ``bin``, the package a ``node_modules/.bin`` link leads into), the
    folders of the files it names, and the folders of its PATH. A folder
    that holds a home as a whole (``~/.local``, ``/var/tmp/x`` with the
    person's home in it) is narrowed to the file or the ``bin`` itself."""
    homes = {
        os.path.realpath(os.path.expanduser("~")),
        env.get("HOME", ""),
        pwd.getpwuid(os.getuid()).pw_dir,
    }
    out: list[str] = []

    def add(path: str) -> None:
        if path and path not in out and not folders.system(path) and path != "/":
            if not any(folders.under(h, path) for h in homes if h):
                out.append(path)

    first = command[0] if command else ""
    found = shutil.which(first, path=env.get("PATH")) if first and "/" not in first else first
    for i, arg in enumerate([found or "", *command[1:]]):
        if not arg.startswith("/") or not os.path.exists(arg):
            continue
        for path in dict.fromkeys((os.path.abspath(arg), os.path.realpath(arg))):
            folder = os.path.dirname(path)
            if i == 0:
                top = _install(path)
                if top and not any(folders.under(h, top) for h in homes if h):
                    add(top)
                    continue
            if any(folders.under(h, folder) for h in homes if h) or folder in ("/tmp", "/var/tmp"):
                add(path)
            else:
                add(folder)
    for entry in env.get("PATH", "").split(":"):
        if entry.startswith("/") and os.path.isdir(entry):
            add(os.path.normpath(entry))
    return tuple(out)


def _install(path: str) -> str | None:
    """The folder a program was installed into: above ``node_modules``, or
    above its ``bin``."""
    parts = path.split("/")
    if "node_modules" in parts:
        return "/".join(parts[: parts.index("node_modules")]) or None
    folder = os.path.dirname(path)
    if os.path.basename(folder) == "bin":
        return os.path.dirname(folder)
    return None


_SIGNS = re.compile(rb"^\s*gpgsign\s*=\s*(true|yes|on|1)\s*$", re.IGNORECASE | re.MULTILINE)


def signing(common: str | None, home: str) -> bool:
    """Whether the project's, the person's or the system's git config asks for
    signed commits (read as text, includes not followed: only for saying so;
    `owl.review.signing` reads it as git does, at accept)."""
    files = [
        "/etc/gitconfig",
        os.path.join(home, ".gitconfig"),
        os.path.join(home, ".config", "git", "config"),
    ]
    if common:
        files.append(os.path.join(common, "config"))
    for path in files:
        try:
            with open(path, "rb") as f:
                if _SIGNS.search(f.read(1 << 16)):
                    return True
        except OSError:
            continue
    return False


def alone(argv: list[str], own: list[str]) -> list[str]:
    """bwrap's argv started with no network helper, through netns.py all the
    same (``-``): it hands bwrap its options and its seccomp filter by fds, so
    that pid 1 inside shows none of them, and leaves out a host socket gone
    between the argv's making and bwrap's start (bwrap cannot make the file to
    cover on the read-only root, and the Run would fail), and says whether
    bwrap failed at its own start (``own``: those options); SIGTERM ignored."""
    return [sys.executable, "-I", "-S", NETNS, "-", "-", *own, "--", *argv]


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


# A default cache given to a Run only where its tool is on the agent's PATH
# (no ~/go in the home of someone who has never used Go); one the person names
# in `sandbox.caches` is given anyway, as is ~/.cache.
CACHE_TOOLS = {
    "~/.npm": ("npm",),
    "~/.cargo/registry": ("cargo",),
    "~/.cargo/git": ("cargo",),
    "~/.gradle/caches": ("gradle",),
    "~/.m2/repository": ("mvn",),
    "~/go/pkg/mod": ("go",),
    "~/.local/share/pnpm": ("pnpm",),
    "~/.yarn": ("yarn",),
    "~/Library/Caches": ("sw_vers",),  # macOS's own (sw_vers is too): never made elsewhere
}


@functools.lru_cache(maxsize=64)
def _on_path(tool: str, path: str) -> bool:
    """Whether ``tool`` is on ``path`` (asked once per PATH: a scan of every
    folder on it for each missing cache would be most of a Run's wrapping)."""
    return shutil.which(tool, path=path) is not None


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


@dataclass(frozen=True)
class Where:
    """A Run's places as its caller names them (macOS's wrapping resolves them)."""

    worktree: str
    project: str
    owl_dirs: tuple[str, ...]
    git: GitPlaces
    keep: str


def wrap_darwin(
    command: Sequence[str],
    settings: policy.Settings,
    agent: str,
    env: Mapping[str, str],
    where: Where,
) -> Wrapped:
    """macOS: the same Policy as a Seatbelt profile run by ``sandbox-exec``
    (the facts gathered as for bwrap, and decided alike); the Run's own home
    is Owl's folder at its own path, its places links in it (``macview``)."""
    why = seatexec.probe()
    if why is not None:
        return Wrapped(list(command), f"not contained: {why}", False, dict(env))
    state = agentstate.AGENTS.get(agent, agentstate.AgentState())
    env = macview.settled(env, macview.state_vars(state.state))
    # real paths: Seatbelt matches those; macOS has no runtime folder (its
    # per-user folders are under the home)
    real = os.path.realpath
    facts = replace(
        gather(env, where.worktree, where.project, where.owl_dirs, where.git, real),
        programs=programs(command, env),
    )
    try:
        os.makedirs(where.keep, mode=0o700, exist_ok=True)
        pol = decide(
            settings,
            agent,
            env,
            facts,
            real(where.keep),
            lambda own, _pol, home: macview.link_places(own, home),
        )
    except OSError as e:
        return Wrapped(
            list(command), f"not contained: its own home cannot be made: {e}", False, dict(env)
        )
    pol = macview.resolved(macview.hidden(pol, facts), facts)
    pol = macview.at_home(pol, env)
    try:  # its TMPDIR: macOS's /tmp is the person's (mactemp)
        slot, tmp = mactemp.make(f"{os.path.basename(where.worktree)}.{agent}")
    except OSError as e:
        return Wrapped(list(command), f"not contained: its temporary folder: {e}", False, dict(env))
    pol = macview.with_tmp(pol, slot, tmp)
    argv = seatbelt.argv(pol, command, macview.state_files(pol))
    why = seatexec.compiles(seatbelt.profile_of(argv))
    if why is not None:
        os.rmdir(tmp)
        return Wrapped(list(command), f"not contained: {why}", False, dict(env))
    inside = policy.agent_env(env, pol)
    # its network is Owl's proxy, outside the sandbox (seatnet.py), which also
    # removes its temporary folder once it has ended
    ports = "none" if pol.network == "none" else ",".join(str(p) for p in pol.host_ports) or "-"
    argv, inside = pyhelper.command(seatbelt.SEATNET, [ports, "--tmp", tmp, "--", *argv], inside)
    return Wrapped(
        argv, seatbelt.label(pol), True, inside, dropped=pol.env_unset, kept=kept_places(pol)
    )
