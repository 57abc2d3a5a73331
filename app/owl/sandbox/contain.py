"""One Run's agent command wrapped in its sandbox, with the label the views show.

The glue between the facts of a Run (its worktree, its project's git directory,
Owl's folders, the agent's environment) and ``policy`` / ``bwrap`` / ``netns``
(started as ``bwrapstart`` says), or ``seatbelt`` on macOS; where the Run's
programs live and which caches it gets come from ``toolplaces``.
The git places come from Owl's records (``GitPlaces``): no file of the worktree
is read, since the agent writes them. Reads the host's lists of bound unix
sockets, its own network namespace's and the others' (``hostsockets``, about
1 ms), and the top of ``/run``; runs no git.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from owl.tree import pyhelper

from . import (
    agentconf,
    agentstate,
    allowlist,
    bwrap,
    bwrapstart,
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
    toolplaces,
)


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
        programs=toolplaces.programs(command, env),
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
    own = [*bwrapstart.seccomp(filt), *(["--setup", setup_report] if setup_report else [])]
    if signing(git.project_git, facts.home):
        # the keys are out of the Run's reach; owl jobs accept signs (owl.review.signing)
        opened += "; commits unsigned here, signed at accept (commit.gpgSign)"
    if pol.network == "none":
        return Wrapped(
            bwrapstart.alone(argv, own),
            f"contained: bwrap {version}, no network{opened}",
            True,
            inside,
            tuple(pol.masked),
            pol.env_unset,
            kept=kept_places(pol),
        )
    ports = ",".join(str(p) for p in pol.host_ports) or "-"
    allow = pol.network == "allow"
    helper, why_not = bwrapstart.user_net("allow" if allow else ports, which)
    if helper is None and allow:  # never the host's network in its place
        return Wrapped(
            bwrapstart.alone(bwrapstart.argv_none(pol, command, path, env_path, version), own),
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
            bwrapstart.alone(argv, own),
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
        bwrapstart.networked(helper, ports, [*report, *own], argv),
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
    caches = [c for c in settings.caches if toolplaces.wanted_cache(c, env)]
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


def with_held(env: Mapping[str, str], agent: str, held: str | None) -> Mapping[str, str]:
    """The agent's environment with the headless credential Owl holds for it
    (``ownhome.held_token``) in its variable, unless the variable is set."""
    name = agentstate.AGENTS.get(agent, agentstate.AgentState()).token_env
    if held is None or name is None or env.get(name):
        return env
    token = ownhome.held_token(held, agent)
    return env if token is None else {**env, name: token}


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
        programs=toolplaces.programs(command, env),
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
