"""The ``[sandbox]`` keys of the config (and of ``[agents.NAME.sandbox]``), checked.

Kept beside the policy so the names and their meaning live in one room; the
config loader calls ``check_table`` and turns a ``KeyProblem`` into its one-line
error naming the file, the key and the value. A ``write`` path that is missing or
not writable is refused here, at load, rather than found out by a Run at night.

Hidden always wins, and no configured path reaches Owl: a ``read``, ``write``,
``caches`` or ``sockets`` entry that is, holds or lies in one of the home's
secrets (``folders.HOME_SECRETS``) or one of Owl's own folders (its config,
data, logs, worktrees, runtime folder) is refused, naming the key and the
path (``write = ["~"]`` would open the keys and Owl's config to every Run).
A ``hide`` entry may name anything.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from .allowlist import REGISTRIES, is_host
from .folders import (
    DEFAULT_CACHES,
    HOME_CREDENTIALS,
    HOME_SECRETS,
    MACOS_HOME_SECRETS,
    expand,
    overlaps,
)
from .policy import DEFAULT_MODE, DEFAULT_TMP_SIZE, MODES, OWN_SOCKETS, READS, Settings

LIST_KEYS = ("read_also", "write", "hide", "env_keep", "caches", "sockets")
KEYS = ("mode", "read", *LIST_KEYS, "network", "allow_hosts", "host_ports", "tmp_size")
AGENT_KEYS = (
    "mode",
    "read",
    "read_also",
    "write",
    "hide",
    "env_keep",
    "network",
    "allow_hosts",
    "sockets",
)
NETWORKS = ("own", "allow", "none")
# Keys whose paths a Run reaches: none may hold a secret or a folder of Owl's.
REACHING = ("read", "read_also", "write", "caches", "sockets")
# The smallest `tmp_size`: less and a tool's first temporary file fails.
MIN_TMP = 1 << 20
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
PROJECT_KEYS = ("mode", "read", "hide", "network")
_NOT_A_PATH = {
    "": "must be an absolute path (or start with ~)",
    "sockets": f'must be "{OWN_SOCKETS}" or a socket\'s absolute path (or start with ~)',
}


class KeyProblem(ValueError):
    """One bad key: ``dotted`` names it, ``value`` is what was given."""

    def __init__(self, dotted: str, value: Any, why: str) -> None:
        super().__init__(why)
        self.dotted, self.value, self.why = dotted, value, why


def check_table(
    body: Any,
    prefix: str,
    allowed: tuple[str, ...] = KEYS,
    home: str | None = None,
    owl: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A checked copy of one sandbox table, or KeyProblem. ``owl``: Owl's own
    folders, which no path a Run reaches may hold."""
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
        elif key == "read" and allowed is PROJECT_KEYS and value != "project":
            raise KeyProblem(dotted, value, 'a project may only narrow: read = "project"')
        elif key == "read" and isinstance(value, str):
            if value not in READS:
                raise KeyProblem(
                    dotted, value, 'must be a list of folders to read (or "home", "project")'
                )
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
            paths = [v for v in value if key != "sockets" or v != OWN_SOCKETS]
            if key in ("read", "read_also", "write", "hide", "caches", "sockets"):
                for v in paths:
                    if not expand(v, home):
                        raise KeyProblem(dotted, v, _NOT_A_PATH.get(key, _NOT_A_PATH[""]))
            if key in REACHING:
                for v in paths:
                    _reaches(dotted, v, expand(v, home), home, owl)
            if key == "write":
                for v in value:
                    _writable(dotted, v, expand(v, home))
            if key == "sockets":
                for v in paths:
                    _socket(dotted, v, expand(v, home))
            value = list(value)
        out[key] = value
    return out


def _reaches(dotted: str, given: str, path: str, home: str, owl: tuple[str, ...]) -> None:
    """Refuse a path that is, holds or lies in a secret of the home or a
    folder of Owl's (by name, and by its real path: a link to one counts)."""
    real = os.path.realpath(path)
    homes = {home, os.path.realpath(home)}
    secrets = [
        os.path.join(h, s)
        for h in homes
        for s in (*HOME_SECRETS, *HOME_CREDENTIALS, *MACOS_HOME_SECRETS)
    ]
    for p in dict.fromkeys((path, real)):
        for secret in secrets:
            if overlaps(p, secret):
                raise KeyProblem(
                    dotted, given, f"holds or lies in {secret}, which a Run never sees"
                )
        for folder in owl:
            if overlaps(p, folder) or overlaps(p, os.path.realpath(folder)):
                raise KeyProblem(
                    dotted,
                    given,
                    f"holds or lies in Owl's own folder {folder}, which a Run never sees",
                )


def notes(table: Mapping[str, Any], prefix: str = "sandbox") -> list[str]:
    """What a key written as older configs wrote it now means (``owl config check``)."""
    out = []
    read = table.get("read")
    if isinstance(read, str):
        out.append(
            f'{prefix}.read = "{read}": a Run now sees a home of its own, the system\'s '
            "folders, the project and your toolchains, never your home as a whole; "
            'name what else it may read as a list (read = ["~/notes"])'
        )
    if table.get("read_also"):
        out.append(f"{prefix}.read_also: read as part of {prefix}.read (its newer name)")
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


def _read(value: Any) -> tuple[str, ...]:
    """``read`` as a list of folders; the older words add none."""
    return tuple(value) if isinstance(value, (list, tuple)) else ()


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
        read=_read(table.get("read")),
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
