"""A systemd user unit that runs the Owl daemon: for machines with no desktop
(no tray, no XDG autostart), where the session has systemd.

`owl autostart on --service` writes `$XDG_CONFIG_HOME/systemd/user/owl.service`
and enables it with `systemctl --user enable --now`; without a login
session the user's manager starts it at boot only with lingering on
(`loginctl enable-linger`), which the answer says.

KillMode=mixed: systemd sends SIGTERM to the daemon alone, which ends every Run
itself (TERM, KILL 5 s later, thawing frozen ones first); whatever is left in
the unit's cgroup after TimeoutStopSec is killed by systemd.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from owl.errors import Refused

UNIT = "owl.service"


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
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={shlex.join([*argv, 'daemon'])}",
    ]
    lines += [f"Environment={shlex.quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    lines += [
        "Environment=OWL_NO_AUTOSTART=1",
        "Restart=on-failure",
        "KillMode=mixed",
        "TimeoutStopSec=30",
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
    _systemctl("enable", "--now", UNIT)
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
