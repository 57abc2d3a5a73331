"""The desktop's own suspend-on-idle timer, where it would put the machine to sleep
before Owl finds it idle.

Owl starts Runs once the machine has been idle for `idle.after` (10 min by
default), and takes its sleep inhibitor only once a Run works. A laptop on AC
whose desktop suspends it after its own idle time at or below that never
reaches Owl's: nothing runs while the person is away. The timers read here:
GNOME's `sleep-inactive-ac-timeout` (gsettings), logind's `IdleAction` /
`IdleActionSec` (the running logind's D-Bus properties, else logind.conf and
its .d folders), and macOS's `pmset` sleep on AC. `owl status` and the tray
say which one, and what to change (or `power.hold_while_queued`, which holds
the inhibitor while Jobs wait).

The reads start programs (gsettings, pmset) or ask the system bus, so they are
made on a thread of their own and kept: `cached()` never waits; views read what it has.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from owl.rules.timefmt import duration

REREAD_AFTER = 300.0  # a person may change the setting while Owl runs


@dataclass(frozen=True)
class Timer:
    """One suspend-on-idle timer: who sets it, after how long, and how to change it."""

    source: str  # "GNOME", "logind", "macOS"
    after_s: float
    setting: str  # the setting's name, as the person would look it up
    fix: str  # the command or edit that turns it off


def first_before(timers: list[Timer], idle_after: float) -> Timer | None:
    """The timer that fires at or before Owl's idle.after, soonest first; None when
    none does (pure)."""
    early = [t for t in timers if 0 < t.after_s <= idle_after]
    return min(early, key=lambda t: t.after_s) if early else None


def words(t: Timer, idle_after: float) -> str:
    """What `owl status` and the tray say of it, in one line."""
    return (
        f"{t.source} suspends the machine after {duration(t.after_s)} without input "
        f"({t.setting}), before Owl's idle.after ({duration(idle_after)}) starts a Run: "
        f"{t.fix}, or set power.hold_while_queued = true"
    )


# ---------------------------------------------------------------- the readers


def gnome() -> Timer | None:
    """GNOME's suspend on AC: `sleep-inactive-ac-type` (suspend unless 'nothing')
    after `sleep-inactive-ac-timeout` seconds (0: never); only where GNOME's
    power daemon (gsd-power) runs for this user, which is what acts on it."""
    tool = shutil.which("gsettings")
    if tool is None or not runs_here("gsd-power"):
        return None
    schema = "org.gnome.settings-daemon.plugins.power"
    try:
        kind = _out([tool, "get", schema, "sleep-inactive-ac-type"]).strip("'\n ")
        secs = _out([tool, "get", schema, "sleep-inactive-ac-timeout"]).split()[-1]
        after = float(secs)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None  # no such schema (not GNOME), or no answer
    if kind in ("nothing", "blank", "") or after <= 0:
        return None
    return Timer(
        "GNOME",
        after,
        f"{schema} sleep-inactive-ac-timeout {int(after)}",
        f"gsettings set {schema} sleep-inactive-ac-type 'nothing'",
    )


LOGIND_FILES = (
    "/usr/lib/systemd/logind.conf.d/*.conf",
    "/etc/systemd/logind.conf",
    "/etc/systemd/logind.conf.d/*.conf",
    "/run/systemd/logind.conf.d/*.conf",
)
SLEEPS = ("suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep")


def logind() -> Timer | None:
    """logind's IdleAction (ignore by default) after IdleActionSec (30 min by
    default): as the running logind holds them (its D-Bus properties: every
    drop-in merged in systemd's own order, a reload seen), else from its files;
    only where systemd runs the machine (`/run/systemd/system`), and logind with it."""
    if not os.path.isdir("/run/systemd/system") and "OWL_LOGIND_BUS" not in os.environ:
        return None
    live = logind_live()
    if live is None:
        return logind_files()
    action, after = live
    return logind_timer(action, after, duration(after))


def logind_live() -> tuple[str, float] | None:
    """(IdleAction, IdleActionSec in seconds) from the running logind; None when
    no logind answers (no system bus, a logind too old to have them)."""
    from jeepney import Properties
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.wrappers import unwrap_msg

    from owl.power import logind as bus

    props = Properties(bus.MANAGER)
    try:
        with open_dbus_connection(bus.bus_name(), auth_timeout=bus.AUTH_TIMEOUT_S) as conn:
            got = [
                unwrap_msg(conn.send_and_get_reply(props.get(name), timeout=bus.CALL_TIMEOUT_S))
                for name in ("IdleAction", "IdleActionUSec")
            ]
        (_, action), (_, usec) = got[0][0], got[1][0]
        return str(action), float(usec) / 1e6
    except Exception:  # no bus, no logind, no such property, a reply not as documented
        return None


def logind_files(patterns: tuple[str, ...] = LOGIND_FILES) -> Timer | None:
    """The same two keys from logind's files, the last file to set each winning."""
    keys: dict[str, str] = {}
    for pattern in patterns:
        for name in sorted(glob.glob(pattern)):
            try:
                keys.update(parse_logind(open(name, encoding="utf-8").read()))
            except (OSError, UnicodeDecodeError):
                continue
    after = systemd_seconds(keys.get("IdleActionSec", "30min"))
    if after is None:
        return None
    return logind_timer(
        keys.get("IdleAction", "ignore").strip(), after, keys.get("IdleActionSec", "30min")
    )


def logind_timer(action: str, after: float, said: str) -> Timer | None:
    """The timer, where the action puts the machine to sleep (pure)."""
    if action not in SLEEPS or after <= 0:
        return None
    return Timer(
        "logind",
        after,
        f"IdleAction={action}, IdleActionSec={said}",
        "set IdleAction=ignore in /etc/systemd/logind.conf.d/ (then restart systemd-logind)",
    )


def parse_logind(text: str) -> dict[str, str]:
    """The [Login] section's keys (pure)."""
    out: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Login" and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


_UNITS = {
    "us": 1e-6, "ms": 1e-3, "": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip


def systemd_seconds(text: str) -> float | None:
    """'30min', '1h 30min', '90' (seconds) as seconds; None when unreadable (pure)."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip().lower())
    if not parts or any(unit not in _UNITS for _, unit in parts):
        return None
    total = sum(float(n) * _UNITS[unit] for n, unit in parts)
    return total if total > 0 else None


def pmset() -> Timer | None:
    """macOS: the AC profile's `sleep` minutes (0: never), from `pmset -g custom`."""
    try:
        text = _out(["pmset", "-g", "custom"])
    except (OSError, subprocess.SubprocessError):
        return None
    minutes = pmset_ac_sleep(text)
    if not minutes:
        return None
    return Timer("macOS", minutes * 60.0, f"pmset sleep {minutes} on AC", "sudo pmset -c sleep 0")


def pmset_ac_sleep(text: str) -> int | None:
    """The `sleep` value under "AC Power:" (pure)."""
    ac = False
    for line in text.splitlines():
        if line.strip().endswith(":") and not line.startswith(" "):
            ac = line.strip().lower().startswith("ac power")
        elif ac:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "sleep" and parts[1].isdigit():
                return int(parts[1])
    return None


def runs_here(name: str) -> bool:
    """Whether a process of this user named `name` runs (its comm)."""
    me = os.getuid()
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != me:
                continue
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    return True
        except OSError:
            continue
    return False


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=5, check=True).stdout


def read() -> list[Timer]:
    """Every suspend-on-idle timer of this machine that is on."""
    readers = (pmset,) if sys.platform == "darwin" else (gnome, logind)
    return [t for t in (r() for r in readers) if t is not None]


# ---------------------------------------------------------------- the cache

_lock = threading.Lock()
_state: dict[str, object] = {"at": None, "timers": [], "reading": False}


def cached() -> list[Timer]:
    """The timers as last read; starts a read on a thread of its own when none is
    recent (never waits on one)."""
    with _lock:
        at = _state["at"]
        stale = at is None or time.monotonic() - at > REREAD_AFTER  # type: ignore[operator]
        if stale and not _state["reading"]:
            _state["reading"] = True
            threading.Thread(target=_refresh, name="owl-sleeptimer", daemon=True).start()
        return list(_state["timers"])  # type: ignore[call-overload]


def _refresh() -> None:
    try:
        timers = read()
    except Exception:  # a reader's bug must not take the views down
        timers = []
    with _lock:
        _state.update(at=time.monotonic(), timers=timers, reading=False)
