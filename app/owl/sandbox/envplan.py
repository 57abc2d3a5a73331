"""The environment a contained Run starts with: what is dropped, what is set.

No display, no way back to Owl and no secret the agent was not meant to have
(by the variable's name); the Run's own tags kept; git told not to sign (the
keys are out of reach); the 127.0.0.1 ports the agent's URLs name, to keep
them reachable from its own network. Pure.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

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
    env: Mapping[str, str], kept: Iterable[str], runtime_dir: str | None
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Which variables to drop, and which to set (TMPDIR and its kin); ``kept``:
    names passed whatever they look like (the agent's own, ``sandbox.env_keep``)."""
    keep = set(kept) | set(RUN_ENV)
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
