"""The ``[sandbox]`` keys of the config (and of ``[agents.NAME.sandbox]``), checked.

Kept beside the policy so the names and their meaning live in one room; the
config loader calls ``check_table`` and turns a ``KeyProblem`` into its one-line
error naming the file, the key and the value. A ``write`` path that is missing or
not writable is refused here, at load, rather than found out by a Run at night.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from .allowlist import REGISTRIES, is_host
from .folders import DEFAULT_CACHES, expand
from .policy import DEFAULT_MODE, DEFAULT_TMP_SIZE, MODES, READS, Settings

LIST_KEYS = ("read_also", "write", "hide", "env_keep", "caches", "sockets")
KEYS = ("mode", "read", *LIST_KEYS, "network", "allow_hosts", "host_ports", "tmp_size")
AGENT_KEYS = (
    "mode",
    "read_also",
    "write",
    "hide",
    "env_keep",
    "network",
    "allow_hosts",
    "sockets",
)
NETWORKS = ("own", "allow", "none")
# The smallest `tmp_size`: less and a tool's first temporary file fails.
MIN_TMP = 1 << 20
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
PROJECT_KEYS = ("mode", "read", "hide", "network")


class KeyProblem(ValueError):
    """One bad key: ``dotted`` names it, ``value`` is what was given."""

    def __init__(self, dotted: str, value: Any, why: str) -> None:
        super().__init__(why)
        self.dotted, self.value, self.why = dotted, value, why


def check_table(
    body: Any, prefix: str, allowed: tuple[str, ...] = KEYS, home: str | None = None
) -> dict[str, Any]:
    """A checked copy of one sandbox table, or KeyProblem."""
    if not isinstance(body, Mapping):
        raise KeyProblem(prefix, body, f"must be a table [{prefix}]")
    home = home or os.path.expanduser("~")
    out: dict[str, Any] = {}
    for key, value in body.items():
        dotted = f"{prefix}.{key}"
        if key not in allowed:
            raise KeyProblem(
                dotted, value, f"unknown key (known in [{prefix}]: {', '.join(allowed)})"
            )
        if key == "mode":
            if value not in MODES:
                raise KeyProblem(dotted, value, 'must be "auto", "required" or "off"')
        elif key == "read":
            if value not in READS:
                raise KeyProblem(dotted, value, 'must be "home" or "project"')
        elif key == "network":
            if not isinstance(value, bool) and value not in NETWORKS:
                raise KeyProblem(dotted, value, 'must be "own", "allow", "none", true or false')
        elif key == "allow_hosts":
            if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
                raise KeyProblem(dotted, value, "must be a list of host names")
            for h in value:
                if not is_host(h):
                    raise KeyProblem(dotted, h, 'must be a host name ("pypi.org", ".example.com")')
            value = list(value)
        elif key == "host_ports":
            if not isinstance(value, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in value
            ):
                raise KeyProblem(dotted, value, "must be a list of port numbers (1-65535)")
            value = list(value)
        elif key == "tmp_size":
            value = _size(dotted, value)
        else:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise KeyProblem(dotted, value, "must be a list of non-empty strings")
            if key in ("read_also", "write", "hide", "caches", "sockets"):
                for v in value:
                    if not expand(v, home):
                        raise KeyProblem(dotted, v, "must be an absolute path (or start with ~)")
            if key == "write":
                for v in value:
                    _writable(dotted, v, expand(v, home))
            if key == "sockets":
                for v in value:
                    _socket(dotted, v, expand(v, home))
            value = list(value)
        out[key] = value
    return out


def _writable(dotted: str, given: str, path: str) -> None:
    if not os.path.exists(path):
        raise KeyProblem(dotted, given, "no such file or folder (a Run could not write it)")
    if not os.access(path, os.W_OK):
        raise KeyProblem(dotted, given, "not writable by this user")


def _socket(dotted: str, given: str, path: str) -> None:
    """A socket's path; one not there yet (its server not started) is let be."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISSOCK(mode):
        raise KeyProblem(dotted, given, "not a unix socket (name the socket itself)")


def _size(dotted: str, value: Any) -> int:
    """Bytes, from a number of bytes or "512M", "1G", "1.5GiB"."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = _SIZE.match(value) if isinstance(value, str) else None
        if m is None:
            raise KeyProblem(dotted, value, 'must be a size such as "512M" or "2G"')
        n = int(float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_"))
    if n < MIN_TMP:
        raise KeyProblem(dotted, value, "must be at least 1M")
    return n


def size_words(n: int) -> str | int:
    """A size as a person writes it ("1G", "512M"), as ``_size`` reads it back;
    bytes that are no whole number of K, M, G or T stay a number."""
    for letter, power in (("T", 4), ("G", 3), ("M", 2), ("K", 1)):
        if n >= 1024**power and n % 1024**power == 0:
            return f"{n // 1024**power}{letter}"
    return n


def settings_from(table: Mapping[str, Any]) -> Settings:
    """The Settings a checked ``[sandbox]`` table gives (defaults for the rest)."""
    return Settings(
        mode=str(table.get("mode", DEFAULT_MODE)),
        read=str(table.get("read", "home")),
        read_also=tuple(table.get("read_also", ())),
        write=tuple(table.get("write", ())),
        hide=tuple(table.get("hide", ())),
        env_keep=tuple(table.get("env_keep", ())),
        network=table.get("network", True) not in (False, "none"),
        allow=table.get("network") == "allow",
        allow_hosts=tuple(table.get("allow_hosts", REGISTRIES)),
        caches=tuple(table.get("caches", DEFAULT_CACHES)),
        host_ports=tuple(table.get("host_ports", ())),
        sockets=tuple(table.get("sockets", ())),
        tmp_size=int(table.get("tmp_size", DEFAULT_TMP_SIZE)),
    )
