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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    ownhome,
    policy,
    ready,
    seatbelt,
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
    # place inside the Run, Owl's folder or file bound there), the agent's
    # state among them. Empty when the Run sees the person's own home.
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
    if sys.platform == "darwin":
        try:
            env = with_held(env, agent, held)
        except ownhome.TokenProblem as e:
            return Wrapped(list(command), f"not started: {e}", False, dict(env), refused=True)
        return wrap_darwin(command, settings, agent, env, worktree, project, owl_dirs, git)
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
    keep = keep or os.path.join(os.path.dirname(worktree), ".sandbox")
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
    keep: str | None = None,
) -> policy.Policy:
    """The Run's Policy, for either sandbox, and the port and key its
    provider's setup names passed on (read from the person's own files, which
    no Run writes). With ``keep`` (Linux), the Run's own home, its project's
    caches and its agent's state made there first (``ownhome``), and every
    place a bind is laid in that home made or mended, no link followed."""
    home = facts.home
    state = agentstate.AGENTS.get(agent, agentstate.AgentState())
    said = agentconf.needs(agent, home, env)  # its provider's port and key, from its own files
    settings = replace(
        settings,
        host_ports=(*settings.host_ports, *said.ports),
        env_keep=(*settings.env_keep, *said.env_keep),
        allow_hosts=allowlist.hosts(agent, env, settings.allow_hosts),
    )
    if keep is None:
        make_folders(state.folders, home, env)
        make_caches(settings.caches, home, env)
        fixed = tuple(p for p in (folders.expand(f, home, env) for f in state.fixed) if p)
        state = replace(state, fixed=agentconf.make_fixed(fixed))  # read-only inside, read here
        return policy.compute(settings, state, facts)
    caches = [c for c in settings.caches if wanted_cache(c, env)]
    settings = replace(settings, read=(*settings.read, *said.reads))
    own = ownhome.make(
        keep, os.path.basename(facts.worktree), facts.project, home, env, caches, agent, state
    )
    facts = replace(facts, own_home=own.home, own_binds=own.binds)
    pol = policy.compute(settings, state, facts)
    ownhome.mend_places(own, home, bwrap.places_in(pol, home))
    return pol


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


def make_folders(wanted: Sequence[str], home: str, env: Mapping[str, str]) -> None:
    """Make the agent's own state folders that are missing (as the agent itself
    would on its first start), so that they can be bound writable; one that
    cannot be made is left out of the sandbox, as before."""
    for folder in wanted:
        path = folders.expand(folder, home, env)
        if path:
            try:
                os.makedirs(path, mode=0o700, exist_ok=True)
            except OSError:
                pass


# A default cache made when missing only where its tool is on the agent's PATH
# (no ~/go in the home of someone who has never used Go); one the person names
# in `sandbox.caches` is made anyway, as is ~/.cache.
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


def make_caches(caches: Sequence[str], home: str, env: Mapping[str, str]) -> None:
    """Make the caches that are missing, so that they can be bound writable: on
    a fresh home the first `npm install` would otherwise meet a read-only one."""
    path = env.get("PATH", os.defpath)
    wanted = [
        c
        for c in caches
        if not os.path.isdir(folders.expand(c, home, env))
        and (c not in CACHE_TOOLS or any(_on_path(t, path) for t in CACHE_TOOLS[c]))
    ]
    make_folders(wanted, home, env)


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


def wrap_darwin(
    command: Sequence[str],
    settings: policy.Settings,
    agent: str,
    env: Mapping[str, str],
    worktree: str,
    project: str,
    owl_dirs: Sequence[str],
    git: GitPlaces | None = None,
) -> Wrapped:
    """macOS: the same Policy as a Seatbelt profile run by ``sandbox-exec``
    (the facts gathered as for bwrap, and decided alike)."""
    why = seatbelt.probe()
    if why is not None:
        return Wrapped(list(command), f"not contained: {why}", False, dict(env))
    # real paths: Seatbelt matches those; macOS has no runtime folder (its
    # per-user folders are under the home)
    facts = gather(env, worktree, project, owl_dirs, git or GitPlaces(), os.path.realpath)
    pol = resolved(decide(settings, agent, env, facts), facts)
    argv = seatbelt.argv(pol, command)
    why = seatbelt.compiles(seatbelt.profile_of(argv))
    if why is not None:
        return Wrapped(list(command), f"not contained: {why}", False, dict(env))
    inside = policy.agent_env(env, pol)
    if pol.network != "none":
        # its network is Owl's proxy, outside the sandbox (seatnet.py)
        ports = ",".join(str(p) for p in pol.host_ports) or "-"
        argv, inside = pyhelper.command(seatbelt.SEATNET, [ports, "--", *argv], inside)
    return Wrapped(argv, seatbelt.label(pol), True, inside, dropped=pol.env_unset)


def resolved(pol: policy.Policy, facts: policy.Facts) -> policy.Policy:
    """The Policy's paths as Seatbelt matches them: resolved, links and all
    (macOS's /tmp, /var and /etc lead into /private; ``~/.aws`` may lead into
    ``~/dotfiles``). A hidden path is denied at both its names. A writable
    folder is allowed where it leads (``~/.claude -> ~/dotfiles/claude``),
    unless that holds the home, Owl's folders or something hidden (a link left
    by an older Run: ``~/.cache -> ~``); a writable file that is a link keeps
    its own name, which then matches nothing (a Run may swap a file it writes
    for a link, never a folder: see seatbelt.py). seatbelt.py stays pure: the
    file system is asked here."""
    hidden = [*pol.hidden, *(os.path.realpath(p) for p in pol.hidden)]
    guarded = {os.path.realpath(p) for p in (facts.home, facts.user_home, *facts.owl_home)}
    guarded |= set(hidden)

    def writable(path: str) -> str:
        real = os.path.realpath(path)
        if real == path:
            return path
        holds = any(g == real or g.startswith(real.rstrip("/") + "/") for g in guarded)
        # a folder cannot be swapped for a link by a Run (seatbelt.py); a file can
        return real if os.path.isdir(real) and not holds else path

    def every(paths: Sequence[str]) -> tuple[str, ...]:
        return _unique(os.path.realpath(p) for p in paths)

    return replace(
        pol,
        readable=every(pol.readable),
        hidden=_unique(hidden),
        writable=_unique(writable(p) for p in pol.writable),
        readonly_over=every(pol.readonly_over),
        revealed=every(pol.revealed),
        sockets=every(pol.sockets),
    )


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in paths if p))
