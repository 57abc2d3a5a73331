"""A project's own settings: `.owl.toml` at its root, read from its base branch.

Read with `git show HEAD:.owl.toml` in the project, never from a Job's
worktree: the agent controls the worktree, and must not be able to loosen its
own checks or caps. Keys: `max_parallel`, `agent`, `[[checks]]` with
`name`, `run` (a shell line run in the worktree) and `timeout` (default 5m),
and `[sandbox]` (`mode`, `read`, `hide`, `network`), which may only narrow what
the person's config allows (`owl.sandbox.policy.Settings.narrowed`).
A file that does not parse, or has an unknown key, is an error that names the
file and the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from owl.rules import bounds
from owl.sandbox import keys
from owl.settings.config import parse_duration

FILENAME = ".owl.toml"
CHECK_TIMEOUT = 300.0


class ProjectError(ValueError):
    """A `.owl.toml` that cannot be used; str() names the file and the key."""


@dataclass(frozen=True)
class Check:
    name: str
    run: str
    timeout: float = CHECK_TIMEOUT


@dataclass(frozen=True)
class ProjectSettings:
    max_parallel: int | None = None
    agent: str | None = None
    checks: tuple[Check, ...] = field(default_factory=tuple)
    sandbox: dict[str, Any] = field(default_factory=dict)


def parse(text: str, where: str) -> ProjectSettings:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProjectError(f"{where}: not valid TOML: {e}") from None
    max_parallel: int | None = None
    agent: str | None = None
    checks: list[Check] = []
    sandbox: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "max_parallel":
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 1 <= value <= bounds.max_parallel()
            ):
                raise ProjectError(
                    f"{where}: max_parallel = {value!r}: must be a whole number, "
                    f"1 to {bounds.max_parallel()}"
                )
            max_parallel = value
        elif key == "agent":
            if not isinstance(value, str) or not value:
                raise ProjectError(f"{where}: agent = {value!r}: must be an agent's name")
            agent = value
        elif key == "checks":
            checks = _checks(value, where)
        elif key == "sandbox":
            try:
                sandbox = keys.check_table(value, "sandbox", keys.PROJECT_KEYS)
            except keys.KeyProblem as e:
                raise ProjectError(f"{where}: {e.dotted} = {e.value!r}: {e.why}") from None
        else:
            raise ProjectError(
                f"{where}: unknown key {key} (known: max_parallel, agent, checks, sandbox)"
            )
    return ProjectSettings(max_parallel, agent, tuple(checks), sandbox)


def _checks(value: Any, where: str) -> list[Check]:
    if not isinstance(value, list):
        raise ProjectError(f"{where}: checks must be [[checks]] tables")
    out = []
    for i, item in enumerate(value, start=1):
        at = f"checks[{i}]"
        if not isinstance(item, dict):
            raise ProjectError(f"{where}: {at} must be a table")
        unknown = set(item) - {"name", "run", "timeout"}
        if unknown:
            raise ProjectError(
                f"{where}: unknown key {at}.{sorted(unknown)[0]} (known: name, run, timeout)"
            )
        name, run = item.get("name"), item.get("run")
        if not isinstance(run, str) or not run.strip():
            raise ProjectError(f"{where}: {at}.run = {run!r}: must be a shell command line")
        if name is None:
            name = run.split()[0]
        if not isinstance(name, str) or not name:
            raise ProjectError(f"{where}: {at}.name = {name!r}: must be a string")
        timeout = CHECK_TIMEOUT
        if "timeout" in item:
            t = item["timeout"]
            try:
                if not isinstance(t, str):
                    raise ValueError('write it with a unit, e.g. "90s"')
                timeout = parse_duration(t)
                if timeout <= 0:
                    raise ValueError("must be more than zero")
                if timeout > bounds.MAX_CHECK_TIMEOUT_S:
                    raise ValueError("must be at most 1d")
            except ValueError as e:
                raise ProjectError(f"{where}: {at}.timeout = {t!r}: {e}") from None
        out.append(Check(name, run, timeout))
    return out


def load(project: Path, ref: str = "HEAD") -> ProjectSettings:
    """The settings committed on the project's base branch (none if no file)."""
    from owl.git.workspace import read_base_file

    text = read_base_file(Path(project), FILENAME, ref)
    if text is None:
        return ProjectSettings()
    return parse(text, f"{Path(project) / FILENAME} (as committed on {ref})")


def read(project: Path) -> ProjectSettings | ProjectError:
    """What the scheduler knows of a project: its settings, or the error that
    names what is wrong in them (said when its Job starts); a project git cannot
    read has no settings of its own. Never raises."""
    import logging

    from owl.git.workspace import WorkspaceError

    try:
        return load(Path(project))
    except ProjectError as e:
        return e
    except (OSError, WorkspaceError) as e:
        logging.getLogger("owl.engine").warning("cannot read %s's settings: %s", project, e)
        return ProjectSettings()
