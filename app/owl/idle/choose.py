"""Which idle backends to use here, chosen once at start, the way psutil picks its platform.

From the platform and the session (`XDG_SESSION_TYPE`, `WAYLAND_DISPLAY`,
`DISPLAY`, `XDG_CURRENT_DESKTOP`) and, on a Wayland compositor that is not
GNOME, from what it advertises:

| session                         | hooks (input as events)     | reader (idle time)  |
| ------------------------------- | --------------------------- | ------------------- |
| X11                             | pynput                      | XScreenSaver, Mutter|
| Wayland, GNOME                  | Mutter's watches            | Mutter (GetIdletime)|
| Wayland, ext-idle-notify        | ext_idle_notify_v1          | the same            |
| Wayland, older KDE / sway 1.7   | org_kde_kwin_idle           | the same            |
| macOS / Windows                 | Quartz or pynput / pynput   | Quartz, ioreg / none|

`OWL_IDLE_BACKEND` forces one (see `FORCED`). Where nothing fits, the plan's
`limit` says exactly what is missing; the monitor shows it only if nothing works.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .base import BackendError, Hooks, Reader

ENV_FORCE = "OWL_IDLE_BACKEND"


@dataclass
class Plan:
    """What to try on this machine, best first, and why it may not be readable."""

    hooks: Hooks | None
    readers: list[Reader] = field(default_factory=list)
    limit: str | None = None  # said when nothing works, e.g. "no DISPLAY"


def _mutter() -> Plan:
    from .mutter import MutterReader
    from .mutter_watch import MutterWatch

    return Plan(MutterWatch(), [MutterReader()])


def _wayland(*protocols: str) -> Callable[[], Plan]:
    def make() -> Plan:
        from .wayland import EXT, KDE, WaylandIdle

        watch = WaylandIdle(protocols=protocols or (EXT, KDE))
        return Plan(watch, [watch])

    return make


def _x11(env: Mapping[str, str]) -> Plan:
    from .mutter import MutterReader
    from .pynput_hooks import PynputHooks
    from .xscreensaver import XScreenSaverReader

    return Plan(PynputHooks("x11"), [XScreenSaverReader(env.get("DISPLAY", "")), MutterReader()])


def _pynput(platform: str) -> Plan:
    from .pynput_hooks import PynputHooks

    return Plan(PynputHooks("x11" if platform.startswith("linux") else platform), [])


def _only_reader(name: str, env: Mapping[str, str]) -> Plan:
    if name == "xscreensaver":
        from .xscreensaver import XScreenSaverReader

        return Plan(None, [XScreenSaverReader(env.get("DISPLAY", ""))])
    from .ioreg import IoregReader

    return Plan(None, [IoregReader()])


#: The names OWL_IDLE_BACKEND takes.
FORCED: dict[str, Callable[[str, Mapping[str, str]], Plan]] = {
    "mutter": lambda p, e: _mutter(),
    "ext-idle-notify": lambda p, e: _wayland("ext_idle_notifier_v1")(),
    "kde-idle": lambda p, e: _wayland("org_kde_kwin_idle")(),
    "wayland": lambda p, e: _wayland()(),
    "x11": lambda p, e: _x11(e),
    "pynput": lambda p, e: _pynput(p),
    "xscreensaver": lambda p, e: _only_reader("xscreensaver", e),
    "ioreg": lambda p, e: _only_reader("ioreg", e),
}


def choose(platform: str | None = None, environ: Mapping[str, str] | None = None) -> Plan:
    """Pick backends for this platform and session.

    Only a Wayland session that is not GNOME's is looked at (one connection to
    the compositor, kept for the backend that uses it); nothing else is opened.
    """
    platform = platform or sys.platform
    env = os.environ if environ is None else environ
    forced = env.get(ENV_FORCE, "").strip().lower()
    if forced:
        make = FORCED.get(forced)
        if make is None:
            return Plan(None, [], f"{ENV_FORCE}={forced} is not one of: {', '.join(FORCED)}")
        return make(platform, env)
    if platform == "darwin":
        from .quartz import darwin_plan

        hooks, darwin_readers = darwin_plan(env.get("OWL_MACOS_INPUT"))
        return Plan(hooks, darwin_readers)
    if platform == "win32":
        return _pynput("win32")
    display = env.get("DISPLAY")
    if env.get("XDG_SESSION_TYPE") == "wayland" or (env.get("WAYLAND_DISPLAY") and not display):
        # pynput and XScreenSaver only see XWayland windows there: worse than nothing.
        return _on_wayland(env)
    if not display:
        if env.get("DBUS_SESSION_BUS_ADDRESS"):
            return Plan(*_split(_mutter()), "no DISPLAY")
        return Plan(None, [], "no DISPLAY")
    return _x11(env)


def _split(plan: Plan) -> tuple[Hooks | None, list[Reader]]:
    return plan.hooks, plan.readers


def desktops(env: Mapping[str, str]) -> list[str]:
    """XDG_CURRENT_DESKTOP as lower-case names ("ubuntu:GNOME" -> ["ubuntu", "gnome"])."""
    return [d.strip().lower() for d in env.get("XDG_CURRENT_DESKTOP", "").split(":") if d.strip()]


def _on_wayland(env: Mapping[str, str]) -> Plan:
    """GNOME: Mutter. Others: the idle protocol the compositor offers, else Mutter, else why not."""
    if "gnome" in desktops(env):
        return _mutter()
    wl = env.get("WAYLAND_DISPLAY")
    if not wl:
        why = "Wayland session without WAYLAND_DISPLAY"
    else:
        from .wayland import WaylandIdle

        watch = WaylandIdle(wl)
        try:
            watch.open()
            return Plan(watch, [watch])
        except BackendError as exc:
            why = str(exc)
    if not env.get("DBUS_SESSION_BUS_ADDRESS"):
        return Plan(None, [], f"{why}, and no session D-Bus for GNOME's idle monitor")
    # Not GNOME by name, but Mutter may be there all the same; if not, say both.
    return Plan(*_split(_mutter()), f"{why}, and GNOME's idle monitor is not on the session bus")
