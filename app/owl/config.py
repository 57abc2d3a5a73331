"""Owl's configuration: one TOML file, a schema, and errors that name the key.

The schema is a table of (section, key) -> kind and default, so that loading,
checking, showing and writing back all read the same facts. A bad file never
half-loads: `load` either returns a whole `Config` or raises `ConfigError`
whose one-line message names the file, the key and the value.

Agent sections are open-ended: `[agents.NAME]` takes `command` (an argv
template) for any agent, and `path`, `args`, `allowed_tools` for the built-in
claude driver. Per-project sections `[projects."PATH"]` take `max_parallel`
and `agent`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from owl import bounds

# ---------------------------------------------------------------- durations

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """"500ms", "90s", "10m", "1h30m" -> seconds. Raises ValueError."""
    if not isinstance(text, str):
        raise ValueError("a duration is a string such as \"90s\" or \"1h30m\"")
    s = text.strip().replace(" ", "")
    if not s:
        raise ValueError("empty duration")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DURATION.match(s, pos)
        if not m:
            raise ValueError(f"not a duration: {text!r} (use e.g. \"500ms\", \"90s\", \"10m\", \"1h30m\")")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not math.isfinite(total):
        raise ValueError(f"not a duration: {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """Seconds -> the shortest text `parse_duration` reads back."""
    if seconds < 1 and seconds != int(seconds):
        return f"{round(seconds * 1000)}ms"
    seconds = int(round(seconds))
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


# ------------------------------------------------------------------- schema

class ConfigError(ValueError):
    """A config the daemon will not use. str() is one line for a person.

    Section, key and agent names come from the file and may hold a newline
    or a control character (TOML allows them in quoted keys): they are shown
    escaped, so the message stays one line whatever the file says."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def one_line(text: str) -> str:
    """`text` with every unprintable character escaped as in JSON ("\\n")."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


@dataclass(frozen=True)
class Key:
    kind: str            # "duration", "bool", "int", "str", "argv"
    default: Any
    check: Callable[[Any], str | None] | None = None   # returns a complaint


def _attempts(v: int) -> str | None:
    if v < 1:
        return "must be 1 or more"
    return None if v <= bounds.MAX_ATTEMPTS else f"must be at most {bounds.MAX_ATTEMPTS}"


def _parallel(v: int) -> str | None:
    top = bounds.max_parallel()
    if v < 1:
        return "must be 1 or more"
    return None if v <= top else f"must be at most {top} (4 for each of this machine's CPUs)"


def _nice(v: int) -> str | None:
    return None if 0 <= v <= 19 else "must be between 0 and 19"


def _nonneg(v: int) -> str | None:
    return None if v >= 0 else "must be 0 or more"


SCHEMA: dict[str, dict[str, Key]] = {
    "idle": {
        "after": Key("duration", "10m", bounds.duration_check(bounds.MAX_IDLE_AFTER_S)),
        "require_ac_power": Key("bool", True),
    },
    "interruption": {
        "grace_window": Key("duration", "15m", bounds.duration_check(bounds.MAX_GRACE_S)),
    },
    "runs": {
        "max_parallel": Key("int", 1, _parallel),
        "timeout": Key("duration", "4h", bounds.duration_check(bounds.MAX_RUN_TIMEOUT_S)),
        "stall": Key("duration", "15m", bounds.duration_check(bounds.MAX_STALL_S)),
        "nice": Key("int", 10, _nice),
    },
    "power": {
        "keep_awake": Key("bool", True),
    },
    "jobs": {
        "attempts": Key("int", 3, _attempts),
        "branch_prefix": Key("str", "owl/"),
    },
    "agent": {
        "default": Key("str", "claude"),
    },
}

def _regex(v: str) -> str | None:
    try:
        re.compile(v)
    except re.error as e:
        return f"not a regular expression ({e})"
    return None


def _exit_code(v: int) -> str | None:
    return None if 1 <= v <= 255 else "must be an exit status from 1 to 255"


AGENT_KEYS: dict[str, Key] = {
    "command": Key("argv", None),
    "path": Key("str", None),
    "args": Key("argv", None),
    "allowed_tools": Key("argv", None),
    # claude: carry each Job's conversation on from Run to Run (--resume)
    "resume": Key("bool", None),
    # command agents: how their output says a usage limit was met (a wait, not a failure)
    "limit_pattern": Key("str", None, _regex),
    "limit_exit_code": Key("int", None, _exit_code),
}

PROJECT_KEYS: dict[str, Key] = {
    "max_parallel": Key("int", None, _parallel),
    "agent": Key("str", None),
}

BUILTIN_AGENTS = ("claude",)
_BRANCH_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*\Z")   # \Z: "$" lets a newline in


@dataclass
class Config:
    """A checked config: seconds for durations, plain Python values otherwise."""

    idle_after: float = 600.0
    require_ac_power: bool = True
    grace_window: float = 900.0
    max_parallel: int = 1
    timeout: float = 4 * 3600.0
    stall: float = 900.0
    nice: int = 10
    keep_awake: bool = True
    attempts: int = 3
    branch_prefix: str = "owl/"
    default_agent: str = "claude"
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def agent(self, name: str) -> dict[str, Any]:
        return self.agents.get(name, {})

    def project_cap(self, project: str) -> int | None:
        return self.projects.get(project, {}).get("max_parallel")


_FIELDS = {
    ("idle", "after"): "idle_after",
    ("idle", "require_ac_power"): "require_ac_power",
    ("interruption", "grace_window"): "grace_window",
    ("runs", "max_parallel"): "max_parallel",
    ("runs", "timeout"): "timeout",
    ("runs", "stall"): "stall",
    ("runs", "nice"): "nice",
    ("power", "keep_awake"): "keep_awake",
    ("jobs", "attempts"): "attempts",
    ("jobs", "branch_prefix"): "branch_prefix",
    ("agent", "default"): "default_agent",
}


def _convert(where: str, dotted: str, key: Key, value: Any) -> Any:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"{where}: {dotted} = {_show(value)}: {why}")

    if key.kind == "duration":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad("a duration is a string such as \"90s\" or \"1h30m\"")
        if isinstance(value, (int, float)):
            raise bad(f"write durations with a unit, e.g. \"{value}s\"")
        try:
            out: Any = parse_duration(value)
        except ValueError as e:
            raise bad(str(e)) from None
    elif key.kind == "bool":
        if not isinstance(value, bool):
            raise bad("must be true or false")
        out = value
    elif key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("must be a whole number")
        out = value
    elif key.kind == "str":
        if not isinstance(value, str) or not value:
            raise bad("must be a non-empty string")
        out = value
    elif key.kind == "argv":
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise bad("must be a list of strings")
        out = list(value)
    else:  # pragma: no cover - schema typo
        raise AssertionError(key.kind)
    if key.check is not None:
        complaint = key.check(out)
        if complaint:
            raise bad(complaint)
    return out


def _show(value: Any) -> str:
    # JSON quoting for strings: a newline or a control character in a value
    # stays escaped, so the message stays one line.
    text = repr(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def from_dict(data: dict[str, Any], where: str = "config") -> Config:
    """Check a parsed TOML document and build a Config, or raise ConfigError."""
    cfg = Config(raw=copy.deepcopy(data))
    for section, body in data.items():
        if section == "agents":
            _load_agents(cfg, body, where)
            continue
        if section == "projects":
            _load_projects(cfg, body, where)
            continue
        if section not in SCHEMA:
            raise ConfigError(f"{where}: unknown section [{section}] "
                              f"(known: {', '.join(sorted([*SCHEMA, 'agents', 'projects']))})")
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: {section} = {_show(body)}: must be a table [{section}]")
        for key, value in body.items():
            spec = SCHEMA[section].get(key)
            if spec is None:
                raise ConfigError(f"{where}: unknown key {section}.{key} "
                                  f"(known in [{section}]: {', '.join(SCHEMA[section])})")
            setattr(cfg, _FIELDS[(section, key)], _convert(where, f"{section}.{key}", spec, value))
    if not _BRANCH_PREFIX.match(cfg.branch_prefix) or ".." in cfg.branch_prefix:
        raise ConfigError(f"{where}: jobs.branch_prefix = {_show(cfg.branch_prefix)}: "
                          "must be letters, digits, '.', '_', '-' and '/', with no '..'")
    if cfg.default_agent not in BUILTIN_AGENTS and cfg.default_agent not in cfg.agents:
        raise ConfigError(f"{where}: agent.default = {_show(cfg.default_agent)}: "
                          f"no such agent (define [agents.{cfg.default_agent}] with a command)")
    return cfg


def _load_agents(cfg: Config, body: Any, where: str) -> None:
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: agents = {_show(body)}: must be tables [agents.NAME]")
    for name, spec in body.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: agents.{name} = {_show(spec)}: must be a table [agents.{name}]")
        agent: dict[str, Any] = {}
        for key, value in spec.items():
            k = AGENT_KEYS.get(key)
            if k is None:
                raise ConfigError(f"{where}: unknown key agents.{name}.{key} "
                                  f"(known: {', '.join(AGENT_KEYS)})")
            agent[key] = _convert(where, f"agents.{name}.{key}", k, value)
        if name not in BUILTIN_AGENTS:
            if not agent.get("command"):
                raise ConfigError(f"{where}: agents.{name}.command is missing: "
                                  "an agent other than claude needs an argv list")
        cfg.agents[name] = agent


def _load_projects(cfg: Config, body: Any, where: str) -> None:
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: projects = {_show(body)}: must be tables [projects.\"PATH\"]")
    for path, spec in body.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: projects.\"{path}\" = {_show(spec)}: must be a table")
        proj: dict[str, Any] = {}
        for key, value in spec.items():
            k = PROJECT_KEYS.get(key)
            if k is None:
                raise ConfigError(f"{where}: unknown key projects.\"{path}\".{key} "
                                  f"(known: {', '.join(PROJECT_KEYS)})")
            proj[key] = _convert(where, f"projects.\"{path}\".{key}", k, value)
        try:
            where_to = Path(path).expanduser()
        except RuntimeError:          # "~someone" with no such user
            raise ConfigError(f"{where}: projects.{_show(path)}: no such user's home "
                              "folder") from None
        if not where_to.is_absolute():
            # a relative key would be read from wherever the daemon started
            raise ConfigError(f"{where}: projects.{_show(path)}: must be an absolute path "
                              "(or start with ~)")
        cfg.projects[str(where_to)] = proj


MAX_BYTES = 1024 * 1024     # a config file is a few hundred bytes; more is not one


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None if it does not exist; ConfigError if it is not a
    regular file (a FIFO or a device would block the reader, or never end).

    Opened non-blocking and checked again after opening, so a file swapped
    for a FIFO between the two looks is refused too."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(before.st_mode):
        raise ConfigError(f"{path}: is {_kind(before.st_mode)}, not a regular file; "
                          "not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: is {_kind(st.st_mode)}, not a regular file; not read")
        if st.st_size > MAX_BYTES:
            raise ConfigError(f"{path}: is {st.st_size} bytes, too large for a config file")
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None
    finally:
        os.close(fd)


def load(path: Path) -> Config:
    """Read and check the config file. A missing file means all defaults."""
    data = read_bytes(path)
    if data is None:
        return Config()
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return from_dict(doc, str(path))


def defaults_document() -> dict[str, Any]:
    """Every key with its default, as a TOML-ready document."""
    return {section: {k: spec.default for k, spec in keys.items()}
            for section, keys in SCHEMA.items()}


def effective_document(cfg: Config) -> dict[str, Any]:
    """The config in force, with defaults filled in, for `owl config show`."""
    doc = defaults_document()
    for (section, key), attr in _FIELDS.items():
        value = getattr(cfg, attr)
        if SCHEMA[section][key].kind == "duration":
            value = format_duration(value)
        doc[section][key] = value
    agents = {"claude": {"path": "claude"}}
    for name, spec in cfg.agents.items():
        agents.setdefault(name, {}).update(spec)
    doc["agents"] = agents
    if cfg.projects:
        doc["projects"] = copy.deepcopy(cfg.projects)
    return doc


def set_value(path: Path, section: str, key: str, value: Any) -> None:
    """Write one key back to the file, keeping every other key the user set.

    The result is checked before it replaces the file, so a bad value never
    reaches disk; the write is atomic (temp file + rename), mode 0600.
    """
    import tomli_w

    from owl.paths import write_atomic

    try:
        doc = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        doc = {}
    doc.setdefault(section, {})[key] = value
    from_dict(doc, str(path))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, tomli_w.dumps(doc).encode("utf-8"))
