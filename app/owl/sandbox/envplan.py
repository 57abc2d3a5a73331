"""The environment a contained Run starts with: what is dropped, what is set.

No display, no way back to Owl and no secret the agent was not meant to have,
by the variable's name (any word of it a key's, a token's, a password's...) or
by its value (a password in a URL, a token by its service's prefix); the
agent's own variables and those the person names kept; the Run's own tags kept; git told not to sign (the
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
    "DOCKER_AUTH_CONFIG",
    "DATABASE_URL",
    "PGPASSWORD",
    "MYSQL_PWD",
    "BW_SESSION",
    "OP_SESSION_*",
    "*_PWD",
    "*_COOKIE",
    "*_DSN",
    "*_CONNECTION_STRING",
)
# Words that make a name a secret's: a word of the name (split at anything but
# a letter or digit) that is one, ends with one (PGPASSWORD, APIKEY, AUTHTOKEN)
# or is one with an S (TOKENS, SECRETS). Not a word that only starts with one:
# KEYBOARD_LAYOUT, TOKENIZERS_PARALLELISM and XDG_SESSION_TYPE are kept. A word
# ending in KEY that is no key (MONKEY, HOTKEY) is dropped too: the safe side,
# and `sandbox.env_keep` names it back.
SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
# Words that count only whole (AUTHOR, PASSAGE and SESSION are other words).
SECRET_WHOLE = ("AUTH", "PASS", "PAT")
# The shell's own names, which look like a password's (…PWD) and are not.
SHELL_ENV = ("PWD", "OLDPWD")
# Named a secret's by the rules above but no secret: git's own environment
# config, whose pairs are judged by their values (see `env_plan`).
_GIT_PAIR = re.compile(r"^GIT_CONFIG_(?:KEY|VALUE)_\d+$")
_WORD = re.compile(r"[A-Z0-9]+")

# A value that carries a password in a URL: scheme://user:password@host (the
# user may be empty: redis://:pw@host). The password holds no "/", "?" or "#"
# (RFC 3986: those end the authority), so a port and a path are not one.
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/?#@:]*:[^\s/?#@]+@", re.IGNORECASE)
# Values that are a well-known service's token, by the prefix each service
# gives its tokens, with enough of a body after it not to be a word: GitHub,
# GitLab, Slack, OpenAI/Anthropic (sk-), Stripe, AWS access key ids, Google
# API keys and OAuth access tokens, npm, PyPI, Hugging Face, DigitalOcean,
# Shopify, Grafana; a private key in PEM.
TOKEN_PREFIXES = (
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"xox[abpre]-[A-Za-z0-9-]{10,}",
    r"xapp-[A-Za-z0-9-]{10,}",
    r"sk-[A-Za-z0-9_-]{20,}",
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",
    r"AIza[A-Za-z0-9_-]{35}",
    r"ya29\.[A-Za-z0-9_-]{20,}",
    r"npm_[A-Za-z0-9]{36}",
    r"pypi-[A-Za-z0-9_-]{16,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"dop_v1_[a-f0-9]{40,}",
    r"shp(?:at|ss|ca)_[a-fA-F0-9]{32}",
    r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
)
_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(TOKEN_PREFIXES) + ")")
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
    """Whether a variable's name says it holds a secret (see ``SECRET_WORDS``)."""
    upper = name.upper()
    if upper in SHELL_ENV or _GIT_PAIR.match(upper):
        return False
    if any(fnmatch.fnmatchcase(upper, pat) for pat in SECRET_ENV):
        return True
    for word in _WORD.findall(upper):
        if word in SECRET_WHOLE:
            return True
        stem = word[:-1] if word.endswith("S") else word
        if any(w.endswith(term) for term in SECRET_WORDS for w in (word, stem)):
            return True
    return False


def secret_value(value: str) -> bool:
    """Whether a value carries a secret whatever its name: a password in a URL,
    or a token by its service's prefix."""
    return bool(_URL_PASSWORD.search(value) or _TOKEN.search(value))


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
    names passed whatever they look like or hold (the agent's own,
    ``sandbox.env_keep``). A secret in one of git's environment config pairs
    (``GIT_CONFIG_VALUE_n``: a remote's URL with its password) takes every pair
    with it, numbered anew: git refuses to start with one missing."""
    keep = set(kept) | set(RUN_ENV)
    drop = [
        name
        for name, value in env.items()
        if name not in keep and dropped(name, value, runtime_dir)
    ]
    if any(_GIT_PAIR.match(name) for name in drop):
        drop += [
            n for n in env if n not in keep and (_GIT_PAIR.match(n) or n == "GIT_CONFIG_COUNT")
        ]
        env = {k: v for k, v in env.items() if k != "GIT_CONFIG_COUNT"}
    tmp = tuple((name, "/tmp") for name in ("TMPDIR", "TMP", "TEMP", "TEMPDIR"))
    return tuple(sorted(set(drop))), (*tmp, *git_settings(env, UNSIGNED))


def dropped(name: str, value: str, runtime_dir: str | None) -> bool:
    """Whether a variable (not named to be kept) stays out of the Run: it leads
    to the desktop or to Owl, its name or its value is a secret's, or it
    points into the desktop's runtime folder."""
    return (
        name in DESKTOP_ENV
        or secret_name(name)
        or secret_value(value)
        or bool(runtime_dir and runtime_dir != "/" and value.startswith(runtime_dir))
    )


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
