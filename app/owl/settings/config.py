"""Owl's configuration: one TOML file, a schema, and errors that name the key.

The schema is a table of (section, key) -> kind and default
(`owl.settings.keys`), so that loading, checking, showing and writing back
all read the same facts. A bad file never
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
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from owl import filesafe
from owl.rules import lifecycle, runcaps, timefmt
from owl.sandbox import keys as sandbox_keys
from owl.rules.budget import Caps
from owl.settings import budgetconf, notifyconf
from owl.settings.keys import AGENT_KEYS, BUILTIN_AGENTS, PROJECT_KEYS, SCHEMA, Key

# ---------------------------------------------------------------- durations

# One spelling of a duration, read and written (rules/timefmt.py).
parse_duration = timefmt.parse
format_duration = timefmt.spell


# ------------------------------------------ errors, and the checked config


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


DEFAULT_MEMORY = runcaps.amount(runcaps.MEMORY_DEFAULT)
DEFAULT_FLOOR = runcaps.amount(runcaps.DISK_FLOOR_DEFAULT)

_BRANCH_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*\Z")  # \Z: "$" lets a newline in


@dataclass
class Config:
    """A checked config: seconds for durations, plain Python values otherwise."""

    idle_after: float = 600.0
    require_ac_power: bool = True
    grace_window: float = lifecycle.GRACE_DEFAULT
    max_parallel: int = 1
    timeout: float = lifecycle.TIMEOUT_DEFAULT
    stall: float = lifecycle.STALL_DEFAULT
    nice: int = 10
    # what one Run may take (owl.rules.runcaps): memory, processes (0: no cap), disk kept free
    run_memory: runcaps.Amount = field(default_factory=lambda: DEFAULT_MEMORY)
    run_processes: int = runcaps.PROCESSES_DEFAULT
    disk_floor: runcaps.Amount = field(default_factory=lambda: DEFAULT_FLOOR)
    keep_awake: bool = True
    hold_while_queued: bool = False
    attempts: int = 3
    branch_prefix: str = "owl/"
    default_agent: str = "claude"
    fallback: list[str] = field(default_factory=list)
    max_wait: float = 8 * 86400.0
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    notify: notifyconf.NotifyConfig = field(default_factory=notifyconf.NotifyConfig)
    sandbox: dict[str, Any] = field(default_factory=dict)  # [sandbox], checked (owl.sandbox.keys)
    budget: Caps = field(default_factory=Caps)  # [budget] (owl.settings.budgetconf)
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
    ("runs", "memory"): "run_memory",
    ("runs", "processes"): "run_processes",
    ("runs", "disk_floor"): "disk_floor",
    ("power", "keep_awake"): "keep_awake",
    ("power", "hold_while_queued"): "hold_while_queued",
    ("jobs", "attempts"): "attempts",
    ("jobs", "branch_prefix"): "branch_prefix",
    ("jobs", "fallback"): "fallback",
    ("agent", "default"): "default_agent",
    ("limits", "max_wait"): "max_wait",
}


def _convert(where: str, dotted: str, key: Key, value: Any) -> Any:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"{where}: {dotted} = {_show(value)}: {why}")

    if key.kind == "duration":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad('a duration is a string such as "90s" or "1h30m"')
        if isinstance(value, (int, float)):
            raise bad(f'write durations with a unit, e.g. "{value}s"')
        try:
            out: Any = parse_duration(value)
        except ValueError as e:
            raise bad(str(e)) from None
    elif key.kind == "amount":
        try:
            out = runcaps.amount(value)
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
        if section == "notify":
            try:
                cfg.notify = notifyconf.load(body, where, parse_duration)
            except ValueError as e:
                raise ConfigError(str(e)) from None
            continue
        if section == "sandbox":
            cfg.sandbox = _sandbox_table(body, "sandbox", where)
            continue
        if section == "budget":
            try:
                cfg.budget = budgetconf.load(body, where)
            except ValueError as e:
                raise ConfigError(str(e)) from None
            continue
        if section not in SCHEMA:
            known = [*SCHEMA, "agents", "projects", "notify", "sandbox", "budget"]
            raise ConfigError(
                f"{where}: unknown section [{section}] (known: {', '.join(sorted(known))})"
            )
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: {section} = {_show(body)}: must be a table [{section}]")
        for key, value in body.items():
            spec = SCHEMA[section].get(key)
            if spec is None:
                raise ConfigError(
                    f"{where}: unknown key {section}.{key} "
                    f"(known in [{section}]: {', '.join(SCHEMA[section])})"
                )
            setattr(cfg, _FIELDS[(section, key)], _convert(where, f"{section}.{key}", spec, value))
    if not _BRANCH_PREFIX.match(cfg.branch_prefix) or ".." in cfg.branch_prefix:
        raise ConfigError(
            f"{where}: jobs.branch_prefix = {_show(cfg.branch_prefix)}: "
            "must be letters, digits, '.', '_', '-' and '/', with no '..'"
        )
    if cfg.default_agent not in BUILTIN_AGENTS and cfg.default_agent not in cfg.agents:
        raise ConfigError(
            f"{where}: agent.default = {_show(cfg.default_agent)}: "
            f"no such agent (define [agents.{cfg.default_agent}] with a command)"
        )
    for name in cfg.fallback or []:
        if name not in BUILTIN_AGENTS and name not in cfg.agents:
            raise ConfigError(
                f"{where}: jobs.fallback names {_show(name)}: no such agent "
                f"(define [agents.{name}] with a command)"
            )
    return cfg


def _load_agents(cfg: Config, body: Any, where: str) -> None:
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: agents = {_show(body)}: must be tables [agents.NAME]")
    for name, spec in body.items():
        if not isinstance(spec, dict):
            raise ConfigError(
                f"{where}: agents.{name} = {_show(spec)}: must be a table [agents.{name}]"
            )
        agent: dict[str, Any] = {}
        for key, value in spec.items():
            if key == "sandbox":
                agent[key] = _sandbox_table(
                    value, f"agents.{name}.sandbox", where, sandbox_keys.AGENT_KEYS
                )
                continue
            k = AGENT_KEYS.get(key)
            if k is None:
                raise ConfigError(
                    f"{where}: unknown key agents.{name}.{key} (known: {', '.join(AGENT_KEYS)})"
                )
            agent[key] = _convert(where, f"agents.{name}.{key}", k, value)
        if name not in BUILTIN_AGENTS:
            if not agent.get("command"):
                raise ConfigError(
                    f"{where}: agents.{name}.command is missing: "
                    "an agent other than the built-in ones "
                    f"({', '.join(BUILTIN_AGENTS)}) needs an argv list"
                )
        cfg.agents[name] = agent


def _sandbox_table(
    body: Any, prefix: str, where: str, allowed: tuple[str, ...] = sandbox_keys.KEYS
) -> dict[str, Any]:
    try:
        return sandbox_keys.check_table(body, prefix, allowed, owl=_owl_places())
    except sandbox_keys.KeyProblem as e:
        raise ConfigError(f"{where}: {e.dotted} = {_show(e.value)}: {e.why}") from None


def _owl_places() -> tuple[str, ...]:
    """Owl's own folders, which no path a Run reaches may hold."""
    from owl.settings.paths import get_paths

    p = get_paths()
    return tuple(
        dict.fromkeys(
            str(f) for f in (p.config.parent, p.db.parent, p.logs, p.worktrees, p.runtime)
        )
    )


def _load_projects(cfg: Config, body: Any, where: str) -> None:
    if not isinstance(body, dict):
        raise ConfigError(f'{where}: projects = {_show(body)}: must be tables [projects."PATH"]')
    for path, spec in body.items():
        if not isinstance(spec, dict):
            raise ConfigError(f'{where}: projects."{path}" = {_show(spec)}: must be a table')
        proj: dict[str, Any] = {}
        for key, value in spec.items():
            k = PROJECT_KEYS.get(key)
            if k is None:
                raise ConfigError(
                    f'{where}: unknown key projects."{path}".{key} '
                    f"(known: {', '.join(PROJECT_KEYS)})"
                )
            proj[key] = _convert(where, f'projects."{path}".{key}', k, value)
        try:
            where_to = Path(path).expanduser()
        except RuntimeError:  # "~someone" with no such user
            raise ConfigError(
                f"{where}: projects.{_show(path)}: no such user's home folder"
            ) from None
        if not where_to.is_absolute():
            # a relative key would be read from wherever the daemon started
            raise ConfigError(
                f"{where}: projects.{_show(path)}: must be an absolute path (or start with ~)"
            )
        cfg.projects[str(where_to)] = proj


MAX_BYTES = 1024 * 1024  # a config file is a few hundred bytes; more is not one


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None if it does not exist; ConfigError if it is not a
    regular file (a FIFO or a device would block the reader, or never end).

    Looked at before opening (opening a device may already act on it), and
    checked again once open, so a file swapped for a FIFO between the two
    looks is refused too."""
    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            raise filesafe.NotRegular(path, before.st_mode)
        with filesafe.opened(path) as (fd, st):
            if st.st_size > MAX_BYTES:
                raise ConfigError(f"{path}: is {st.st_size} bytes, too large for a config file")
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
    except FileNotFoundError:
        return None
    except filesafe.NotRegular as e:
        raise ConfigError(f"{e}; not read") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None


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
    return {
        section: {k: spec.default for k, spec in keys.items()} for section, keys in SCHEMA.items()
    }


def effective_document(cfg: Config) -> dict[str, Any]:
    """The config in force, with defaults filled in, for `owl config show`."""
    doc = defaults_document()
    for (section, key), attr in _FIELDS.items():
        value = getattr(cfg, attr)
        if SCHEMA[section][key].kind == "duration":
            value = format_duration(value)
        elif isinstance(value, runcaps.Amount):
            value = value.text
        doc[section][key] = value
    agents: dict[str, dict[str, Any]] = {"claude": {"path": "claude", "resume": True}}
    for name, spec in cfg.agents.items():
        agents.setdefault(name, {}).update(spec)
    doc["agents"] = agents
    if cfg.projects:
        doc["projects"] = copy.deepcopy(cfg.projects)
    doc["notify"] = notifyconf.document(cfg.notify, doc["idle"]["after"], format_duration)
    doc["budget"] = budgetconf.document(cfg.budget)
    sb = sandbox_keys.settings_from(cfg.sandbox or {})
    doc["sandbox"] = {key: _plain(getattr(sb, key)) for key in sandbox_keys.KEYS}
    doc["sandbox"]["tmp_size"] = sandbox_keys.size_words(sb.tmp_size)
    if sb.network and sb.allow:
        doc["sandbox"]["network"] = "allow"
    return doc


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def set_value(path: Path, section: str, key: str, value: Any) -> None:
    """Write one key back to the file, keeping every other key the user set.

    The result is checked before it replaces the file, so a bad value never
    reaches disk; the write is atomic (temp file + rename), mode 0600.
    """
    import tomli_w

    from owl.settings.paths import write_atomic

    try:
        doc = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        doc = {}
    doc.setdefault(section, {})[key] = value
    from_dict(doc, str(path))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, tomli_w.dumps(doc).encode("utf-8"))
