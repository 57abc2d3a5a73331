"""Which host names a Run with ``sandbox.network = "allow"`` may reach. Pure.

The default, when ``sandbox.allow_hosts`` is not given: the agent's own API
hosts (its built-in ones and the host of every non-loopback URL in its
environment, as ``ANTHROPIC_BASE_URL`` names one) and the package registries
a build fetches from. A leading ``.`` (or ``*.``) names every host under it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REGISTRIES = (
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "rubygems.org",
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
)

# Each built-in agent's own service (its model API and its sign-in).
AGENT_HOSTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com", "console.anthropic.com", "claude.ai"),
    "codex": ("api.openai.com", "chatgpt.com", "auth.openai.com"),
    "gemini": (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    ),
    "copilot": ("api.githubcopilot.com", "api.github.com", "github.com"),
    "opencode": ("opencode.ai", "models.dev"),
}

_URL = re.compile(r"^https?://(?:[^/@\s]*@)?(\[[^\]]+\]|[^:/\s?#]+)", re.IGNORECASE)
# The variables that name an agent's service (ANTHROPIC_BASE_URL, OPENAI_API_BASE,
# GOOGLE_GEMINI_BASE_URL, AZURE_OPENAI_ENDPOINT, ...), not any URL at all.
_SERVICE = re.compile(r"(^|_)(BASE_URL|API_BASE|API_URL|ENDPOINT)$")
_NAME = re.compile(r"^(\*\.|\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_LOOPBACK = ("localhost", "127.", "[::1]", "0.0.0.0")


def is_host(name: str) -> bool:
    """Whether ``name`` is a host name as the allow-list takes it."""
    return len(name) <= 253 and _NAME.match(name.lower()) is not None


def url_hosts(env: Mapping[str, str]) -> tuple[str, ...]:
    """The hosts of the service URLs in the agent's environment, but loopback's."""
    out: list[str] = []
    for name, value in env.items():
        m = _URL.match(value) if _SERVICE.search(name.upper()) else None
        if m is None:
            continue
        host = m.group(1).lower()
        if not host.startswith(_LOOPBACK) and is_host(host) and host not in out:
            out.append(host)
    return tuple(out)


def hosts(agent: str, env: Mapping[str, str], given: Iterable[str] | None) -> tuple[str, ...]:
    """The Run's allow-list: ``given`` (``sandbox.allow_hosts``) or the
    registries, with the agent's own hosts always."""
    base = tuple(given) if given is not None else REGISTRIES
    return tuple(dict.fromkeys([*AGENT_HOSTS.get(agent, ()), *url_hosts(env), *base]))
