"""A systemd user unit that runs the Owl daemon: for machines with no desktop
(no tray, no XDG autostart), where the session has systemd.

`owl autostart on --service` writes `$XDG_CONFIG_HOME/systemd/user/owl.service`
and enables and (re)starts it with `systemctl --user`; without a login
session the user's manager starts it at boot only with lingering on
(`loginctl enable-linger`), which the answer says.

KillMode=mixed: systemd sends SIGTERM to the daemon alone, which ends every Run
itself (TERM, KILL 5 s later, thawing frozen ones first); whatever is left in
the unit's cgroup after TimeoutStopSec (well past those 5 s and the Runs' last
git) is killed by systemd.

Delegate=yes: the unit's cgroup subtree is the daemon's, so each Run gets a
cgroup of its own there (`owl.tree.cgroup`: an atomic freeze and kill).
OOMPolicy=continue: the kernel's OOM killer taking a process of a Run (the
unit's default policy, `stop`, would stop Owl with it and record every Run
"interrupted: the daemon stopped") leaves the daemon to record that Run's end.
Restart=on-failure: a daemon that crashed is started again, and its start
records what the crash interrupted.

This is the one way Owl's daemon runs under a systemd user manager: `owl add`
from a terminal and the tray started at login reach this unit (starting it
through the manager, `start()`), rather than starting a daemon of their own.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from owl.errors import Refused

UNIT = "owl.service"
# Longer than a stop takes: every Run TERMed, KILLed 5 s later, their ends recorded.
STOP_TIMEOUT = 30


def unit_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "systemd" / "user" / UNIT


def problem() -> str | None:
    """Why no user unit can be used here, in a few words; None when one can."""
    if shutil.which("systemctl") is None:
        return "no systemctl on PATH: this system does not run systemd"
    try:
        p = subprocess.run(
            ["systemctl", "--user", "show-environment"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"systemctl --user does not answer ({e})"
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or ["no user manager"])[0]
        return f"this session has no systemd user manager ({why})"
    return None


def render(argv: list[str], env: dict[str, str]) -> str:
    """The unit's text: the daemon of this installed Owl, with its OWL_HOME."""
    lines = [
        "[Unit]",
        "Description=Owl: runs coding agents while you are away",
        # a daemon that cannot start (a broken config) is not started again forever
        "StartLimitIntervalSec=600",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={shlex.join([*argv, 'daemon'])}",
    ]
    lines += [f"Environment={shlex.quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    lines += [
        "Environment=OWL_NO_AUTOSTART=1",
        "Restart=on-failure",
        "RestartSec=2",
        "KillMode=mixed",
        f"TimeoutStopSec={STOP_TIMEOUT}",
        "Delegate=yes",
        "OOMPolicy=continue",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def _systemctl(*args: str) -> None:
    p = subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0]
        raise Refused(f"systemctl --user {' '.join(args)} failed: {why}")


def enable(argv: list[str], env: dict[str, str]) -> Path:
    """Install and start the unit; Refused (one line) where systemd cannot."""
    why = problem()
    if why:
        raise Refused(
            f"cannot install a systemd user unit: {why}; `owl daemon --detach` "
            "runs the daemon in the background instead"
        )
    from owl.autostart.command import install

    target = install(unit_path(), render(argv, env).encode())
    _systemctl("daemon-reload")
    _systemctl("enable", UNIT)
    # a restart, not `enable --now`: a daemon already running (the unit turned on
    # before) starts again from the rewritten unit, as the answer says
    _systemctl("restart", UNIT)
    return target


def disable() -> Path | None:
    """Stop and remove the unit; None when there was none."""
    target = unit_path()
    if not target.exists():
        return None
    if problem() is None:
        subprocess.run(
            ["systemctl", "--user", "disable", "--now", UNIT], capture_output=True, timeout=30
        )
    target.unlink(missing_ok=True)
    if problem() is None:
        subprocess.run(["systemctl", "--user", "daemon-reload"], capture_output=True, timeout=30)
    return target


def status() -> tuple[bool, Path]:
    return unit_path().exists(), unit_path()


def unit_home(text: str) -> str | None:
    """The OWL_HOME a unit's text runs the daemon with (None: the default one)."""
    for line in text.splitlines():
        if line.startswith("Environment="):
            for word in shlex.split(line[len("Environment=") :]):
                if word.startswith("OWL_HOME="):
                    return word[len("OWL_HOME=") :]
    return None


def serves(env: dict[str, str]) -> bool:
    """Whether the installed unit runs the daemon of this home (`env`:
    `owl_environment()`, OWL_HOME when set): then that unit is how it starts."""
    try:
        text = unit_path().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return unit_home(text) == env.get("OWL_HOME")


def start(env: dict[str, str]) -> str | None:
    """Start this home's daemon through the user manager, where its unit is
    installed: None when started (or already running), else why not in a few
    words (no unit for this home: "", so the caller starts one itself)."""
    if not serves(env):
        return ""
    why = problem()
    if why:
        return f"the user unit {unit_path()} is installed, but {why}"
    p = subprocess.run(
        ["systemctl", "--user", "start", UNIT], capture_output=True, text=True, timeout=60
    )
    if p.returncode != 0:
        said = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0]
        return f"systemctl --user start {UNIT} failed: {said} (journalctl --user -u {UNIT})"
    return None


def failed() -> str | None:
    """Why the unit is not running after a start (its state and result), or None
    while it runs or starts."""
    p = subprocess.run(
        ["systemctl", "--user", "show", UNIT, "-p", "ActiveState", "-p", "Result"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    props = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    if props.get("ActiveState") in ("failed", "inactive"):
        return (
            f"{UNIT} is {props['ActiveState']} ({props.get('Result', '?')}); "
            f"journalctl --user -u {UNIT} says why"
        )
    return None


def install_unit(argv: list[str], env: dict[str, str]) -> Path | None:
    """Write the unit (not enabled: the tray started at login starts it) where a
    user manager answers; None where none does."""
    if problem() is not None:
        return None
    from owl.autostart.command import install

    target = install(unit_path(), render(argv, env).encode())
    subprocess.run(["systemctl", "--user", "daemon-reload"], capture_output=True, timeout=30)
    return target
