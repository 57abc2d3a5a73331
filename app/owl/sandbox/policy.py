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
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MODES = ("auto", "required", "off")
# On Linux a Run that cannot be contained does not start unless the person
# wrote otherwise ("auto" falls back, "off" never contains); on macOS, where
# the Seatbelt profile has not run yet, Runs start uncontained, saying so.
DEFAULT_MODE = "required" if sys.platform.startswith("linux") else "auto"
READS = ("home", "project")

# Under every home the Run may see: hidden (an empty folder, or /dev/null for a file).
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".docker",
    ".kube",
    ".local/share/keyrings",
    ".password-store",
    ".pki",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/Code/User/globalStorage",
    ".git-credentials",
    ".config/git/credentials",
    ".pypirc",
    ".npmrc",
    ".config/hub",
    ".vault-token",
    ".bash_history",
    ".zsh_history",
)
# macOS's own secret places under a home (absent on Linux, where bwrap skips them).
MACOS_HOME_SECRETS = (
    "Library/Keychains",
    "Library/Cookies",
    "Library/HTTPStorages",
    "Library/Mail",
    "Library/Messages",
    "Library/Safari",
    "Library/Accounts",
    "Library/Calendars",
    "Library/Application Support/AddressBook",
    "Library/Application Support/com.apple.TCC",
    "Library/Containers/com.apple.Safari",
    "Library/Containers/com.apple.mail",
    "Library/Group Containers/group.com.apple.notes",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Chromium",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Application Support/Arc",
    "Library/Application Support/Code/User/globalStorage",
    "Library/Application Support/1Password",
    "Library/Group Containers/2BUA8C4S2C.com.1password",
)
# Outside any home: the X11 sockets (the private /tmp hides them too; named for Seatbelt).
SYSTEM_HIDDEN = ("/tmp/.X11-unix", "/tmp/.ICE-unix")

# Caches a build or an installer writes; writable when they exist (`sandbox.caches`).
DEFAULT_CACHES = (
    "~/.cache",
    "~/.npm",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.gradle/caches",
    "~/.m2/repository",
    "~/go/pkg/mod",
    "~/.local/share/pnpm",
    "~/.yarn",
    "~/Library/Caches",  # macOS's (pip, go-build, Homebrew); Owl's own in it stays hidden
)
# With read = "project": toolchains in the home the Run still needs to read.
HOME_TOOLCHAINS = (
    "~/.local/bin",
    "~/.local/lib",
    "~/.cargo/bin",
    "~/.rustup",
    "~/.nvm",
    "~/.pyenv",
    "~/.volta",
    "~/.deno",
    "~/.bun",
    "~/go/bin",
    "~/.gitconfig",
    "~/.config/git",
)
# With read = "project": the system's own top-level folders that stay readable.
SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/var",
    "/srv",
    "/nix",
    "/snap",
    "/run",
    "/sys",
)

# Variables that lead to the desktop or back to Owl: never passed in.
DESKTOP_ENV = (
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "DBUS_SESSION_BUS_ADDRESS",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "OWL_HOME",
    "SESSION_MANAGER",
    "GNOME_KEYRING_CONTROL",
    "KRB5CCNAME",
    "PULSE_SERVER",
    "PIPEWIRE_REMOTE",
)
# Names of well-known secrets: fnmatch patterns over the variable's name (upper-cased).
SECRET_ENV = (
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "PYPI_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "VAULT_TOKEN",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*_PASSWORD",
    "*_PASSWD",
    "*_API_KEY",
    "*_ACCESS_KEY",
    "*_PRIVATE_KEY",
    "*_CREDENTIALS",
    "*_AUTH",
    "DATABASE_URL",
)
# The Run's own tags and facts, which no pattern drops. OWL_INSTANCE, a random
# id of Owl's home that names no path, is how the Run's processes are found
# after a crash of Owl's: the sandbox's own processes carry the agent's
# environment and no other, so they keep it.
RUN_ENV = (
    "OWL_RUN_ID",
    "OWL_JOB_ID",
    "OWL_INSTANCE",
    "OWL_ATTEMPT",
    "OWL_BRANCH",
    "OWL_WORKTREE",
    "OWL_HANDOFF",
)
# Set for every contained Run: the signing keys (~/.gnupg, the agent's socket)
# are out of its reach, so a repository with commit.gpgsign = true could not
# commit at all. Given as git's own environment settings (read after every
# config file): the Run's commits are unsigned.
UNSIGNED = (("commit.gpgSign", "false"), ("tag.gpgSign", "false"))
# The host's folders of sockets (and pid files, locks) that a Run sees as an
# empty folder of its own: a socket there (docker's, podman's, snapd's, the
# system bus, the session's) answers a connect() through any read-only bind.
PRIVATE_SYSTEM = ("/run", "/var/run")
# A size a Run's /tmp and /dev/shm may not pass (`sandbox.tmp_size`): without
# one, a tmpfs may take half of the machine's memory.
DEFAULT_TMP_SIZE = 1 << 30


@dataclass(frozen=True)
class AgentState:
    """What one agent needs of its own: state it writes, variables it keeps.

    A path may be ``$VAR`` or ``$VAR/rest``: the agent's own variable when it is
    set (Claude Code's ``CLAUDE_CONFIG_DIR``, Codex's ``CODEX_HOME``), else the
    fallback after ``|``."""

    state: tuple[str, ...] = ()
    env_keep: tuple[str, ...] = ()
    # Of `state`, the folders made before the Run when missing: a folder that
    # is not there cannot be bound writable, and what the agent then wrote
    # (its conversations, which the next Run resumes) would be lost with it.
    folders: tuple[str, ...] = ()
    # The agent's own config files Owl reads to give it its provider's port and
    # key (`agentconf`): read-only inside, so no Run widens the next one's reach.
    fixed: tuple[str, ...] = ()


AGENTS: dict[str, AgentState] = {
    "claude": AgentState(
        state=(
            "$CLAUDE_CONFIG_DIR|~/.claude",
            "~/.claude.json",
            "~/.claude.json.backup",
            "~/.config/claude",
        ),
        env_keep=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        folders=("$CLAUDE_CONFIG_DIR|~/.claude",),
        fixed=("$CLAUDE_CONFIG_DIR/settings.json|~/.claude/settings.json",),
    ),
    "codex": AgentState(
        state=("$CODEX_HOME|~/.codex",),
        env_keep=("OPENAI_API_KEY", "CODEX_API_KEY"),
        folders=("$CODEX_HOME|~/.codex",),
        fixed=("$CODEX_HOME/config.toml|~/.codex/config.toml",),
    ),
    "gemini": AgentState(
        state=("~/.gemini",),
        env_keep=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        folders=("~/.gemini",),
    ),
    # OpenCode keeps its sessions (SQLite) under ~/.local/share/opencode, and
    # dies at start with EROFS when it cannot make its folders; it writes a
    # .gitignore (and plugins) into its config folder.
    "opencode": AgentState(
        state=(
            "$XDG_DATA_HOME/opencode|~/.local/share/opencode",
            "$XDG_STATE_HOME/opencode|~/.local/state/opencode",
            "$XDG_CACHE_HOME/opencode|~/.cache/opencode",
            "$XDG_CONFIG_HOME/opencode|~/.config/opencode",
        ),
        env_keep=("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_API_KEY"),
        folders=(
            "$XDG_DATA_HOME/opencode|~/.local/share/opencode",
            "$XDG_STATE_HOME/opencode|~/.local/state/opencode",
            "$XDG_CACHE_HOME/opencode|~/.cache/opencode",
            "$XDG_CONFIG_HOME/opencode|~/.config/opencode",
        ),
        fixed=("$XDG_CONFIG_HOME/opencode/opencode.json|~/.config/opencode/opencode.json",),
    ),
    # Copilot CLI keeps its sessions and settings under ~/.copilot (COPILOT_HOME),
    # and unpacks its own package into ~/.cache/copilot at its first start
    # (ENOENT on mkdir, exit 1, where it cannot).
    "copilot": AgentState(
        state=("$COPILOT_HOME|~/.copilot", "$XDG_CACHE_HOME/copilot|~/.cache/copilot"),
        env_keep=(
            "COPILOT_GITHUB_TOKEN",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "COPILOT_PROVIDER_API_KEY",
            "COPILOT_PROVIDER_BEARER_TOKEN",
        ),
        folders=("$COPILOT_HOME|~/.copilot", "$XDG_CACHE_HOME/copilot|~/.cache/copilot"),
    ),
}


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
    # Of PRIVATE_SYSTEM, the real folders (not a symlink to another): each an empty one inside.
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

    read_root: str  # "home": all of / read-only; "project": SYSTEM_READ
    readable: tuple[str, ...]  # read-only binds over the root (project, homes...)
    hidden: tuple[str, ...]  # empty folders / /dev/null files
    writable: tuple[str, ...]  # read-write binds
    readonly_over: tuple[str, ...]  # read-only binds laid over the writable ones
    env_unset: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    network: str  # "own" (user-mode networking) | "none"
    host_ports: tuple[int, ...]  # 127.0.0.1 ports of the host kept reachable
    worktree: str = ""
    private: tuple[str, ...] = ()  # system folders seen empty (PRIVATE_SYSTEM)
    private_links: tuple[tuple[str, str], ...] = ()  # symlinks kept in them
    private_files: tuple[str, ...] = ()  # files kept in them, read-only
    masked: tuple[str, ...] = ()  # host sockets out of reach: /dev/null laid over each
    sockets: tuple[str, ...] = ()  # host sockets opened on purpose (`sandbox.sockets`)
    tmp_size: int = DEFAULT_TMP_SIZE
    # read-only binds laid after the hidden ones and before the writable: the
    # Job's git store, which lies in Owl's hidden folder
    revealed: tuple[str, ...] = ()


def expand(path: str, home: str, env: Mapping[str, str] | None = None) -> str:
    """``~`` and ``$VAR|fallback`` in a path, made absolute and normal."""
    if path.startswith("$"):
        var, _, fallback = path[1:].partition("|")
        name, slash, rest = var.partition("/")
        value = (env or {}).get(name)
        if value:
            path = value + (slash + rest if slash else "")
        elif fallback:
            path = fallback
        else:
            return ""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return posixpath.normpath(path) if path.startswith("/") else ""


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for p in paths:
        if p and p not in out:
            out.append(p)
    return tuple(out)


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pat) for pat in SECRET_ENV)


_LOOPBACK_URL = re.compile(
    r"^[a-z][a-z0-9+.-]*://(?:127\.\d+\.\d+\.\d+|localhost|\[::1\]):(\d+)", re.IGNORECASE
)


def loopback_ports(env: Mapping[str, str]) -> tuple[int, ...]:
    """Ports of 127.0.0.1 URLs the agent is pointed at (a local model API, a
    proxy): kept reachable from inside its own network namespace."""
    ports = []
    for value in env.values():
        m = _LOOPBACK_URL.match(value)
        if m and 0 < int(m.group(1)) < 65536 and int(m.group(1)) not in ports:
            ports.append(int(m.group(1)))
    return tuple(sorted(ports))


def env_plan(
    env: Mapping[str, str], settings: Settings, agent: AgentState, runtime_dir: str | None
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Which variables to drop, and which to set (TMPDIR and its kin)."""
    keep = set(agent.env_keep) | set(settings.env_keep) | set(RUN_ENV)
    drop = []
    for name, value in env.items():
        if name in keep:
            continue
        if (
            name in DESKTOP_ENV
            or secret_name(name)
            or (runtime_dir and runtime_dir != "/" and value.startswith(runtime_dir))
        ):
            drop.append(name)
    tmp = tuple((name, "/tmp") for name in ("TMPDIR", "TMP", "TEMP", "TEMPDIR"))
    return tuple(sorted(drop)), (*tmp, *git_settings(env, UNSIGNED))


def git_settings(
    env: Mapping[str, str], settings: Iterable[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """``settings`` as git's environment config (GIT_CONFIG_COUNT, _KEY_n,
    _VALUE_n), after any the environment already gives."""
    try:
        n = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        n = 0
    out: list[tuple[str, str]] = []
    for key, value in settings:
        out += [(f"GIT_CONFIG_KEY_{n}", key), (f"GIT_CONFIG_VALUE_{n}", value)]
        n += 1
    return (*out, ("GIT_CONFIG_COUNT", str(n)))


def agent_env(env: Mapping[str, str], policy: Policy) -> dict[str, str]:
    """The environment the Run starts with, its sandbox's own processes and
    the agent alike (so no /proc/PID/environ inside holds more than the agent's)."""
    out = {k: v for k, v in env.items() if k not in set(policy.env_unset)}
    out.update(policy.env_set)
    return out


def masked_sockets(
    found: Iterable[str], covered: Iterable[str], opened: Iterable[str]
) -> tuple[str, ...]:
    """Of the host's sockets ``found``, those a Run would still see: not under a
    folder it sees empty or as its own (``covered``), not opened on purpose."""
    cover, keep = tuple(covered), set(opened)
    return _unique(s for s in found if s not in keep and not any(under(s, c) for c in cover))


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
    hidden = [h for h in _unique(hidden) if h not in writable and h not in revealed]

    drop, set_ = env_plan(env, settings, agent, facts.runtime_dir)
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
    )
