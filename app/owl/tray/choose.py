"""Which pystray backend to use here, chosen once at start, before pystray is imported
(it picks one at import and raises with no display).

| platform                   | backend                                              |
| -------------------------- | ---------------------------------------------------- |
| macOS / Windows            | ``darwin`` / ``win32``                               |
| Linux/BSD on X             | ``appindicator`` when a StatusNotifier host is on    |
|                            | the session bus, else ``gtk`` (XEmbed) when an X     |
|                            | tray owns ``_NET_SYSTEM_TRAY_S<n>``                  |
| Wayland (no ``DISPLAY``)   | ``appindicator`` only: there is no XEmbed tray       |

``PYSTRAY_BACKEND`` forces one. ``xorg`` is refused: it has no menu and
ignores clicks, so Owl would be uncontrollable. No display or no tray host
within a short wait raises `TrayUnavailable`, and the caller runs the daemon
headless instead.
"""

from __future__ import annotations

import os
import sys
import time

HOST_WAIT_S = 10.0  # a login item may start before the panel does
# An environment that cannot see the system's PyGObject (a plain venv, pipx's
# default) cannot show the tray: this is the install that can.
GI_INSTALL = (
    "pipx install --system-site-packages --python /usr/bin/python3 owl-away "
    "(or the wheel, dist/owl_away-*.whl)"
)


class TrayUnavailable(RuntimeError):
    """No usable tray here; str() is one line saying why."""


def _x_tray_owned(display_name: str | None = None) -> bool:
    """True when an XEmbed system tray owns this screen's tray selection."""
    try:
        from Xlib import X, display as xdisplay
    except ImportError:
        return False
    try:
        d = xdisplay.Display(display_name)
    except Exception:
        return False
    try:
        atom = d.intern_atom(f"_NET_SYSTEM_TRAY_S{d.get_default_screen()}")
        return d.get_selection_owner(atom) != X.NONE
    except Exception:
        return False
    finally:
        d.close()


def _sni_host_present() -> bool:
    """True when a StatusNotifier watcher (KDE, GNOME's extension...) is on the bus."""
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return False
    try:
        from jeepney import DBus, new_method_call  # noqa: F401
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        return False
    try:
        with open_dbus_connection(bus="SESSION") as conn:
            reply = conn.send_and_get_reply(
                DBus().NameHasOwner("org.kde.StatusNotifierWatcher"), timeout=2
            )
            return bool(reply.body[0])
    except Exception:
        return False


def choose_backend(requested: str | None = None, *, wait_s: float = HOST_WAIT_S) -> str:
    """The pystray backend to use here, or TrayUnavailable saying why not."""
    name = requested or os.environ.get("PYSTRAY_BACKEND") or None
    if name == "xorg":
        raise TrayUnavailable("the xorg tray backend has no menu; use gtk or appindicator")
    if name == "dummy":
        return name
    if sys.platform == "darwin":
        return name or "darwin"
    if sys.platform == "win32":
        return name or "win32"
    # Wayland has no XEmbed tray: only a StatusNotifier host can show the icon there.
    wayland_only = bool(os.environ.get("WAYLAND_DISPLAY")) and not os.environ.get("DISPLAY")
    if not os.environ.get("DISPLAY") and not wayland_only:
        raise TrayUnavailable("no display (DISPLAY is not set)")
    if wayland_only and name not in (None, "appindicator"):
        raise TrayUnavailable(f"the {name} tray needs X (DISPLAY); on Wayland use appindicator")
    try:
        import gi

        gi.require_version("Gtk", "3.0")
    except (ImportError, ValueError) as e:
        raise TrayUnavailable(
            f"PyGObject with GTK 3 is not available: {e}; the tray needs the "
            "desktop's own (Debian/Ubuntu: sudo apt install python3-gi "
            "gir1.2-gtk-3.0), seen by Owl's environment: "
            f"{GI_INSTALL}"
        ) from None
    if name:
        return name
    return _wait_for_host(wayland_only, wait_s)


def _wait_for_host(wayland_only: bool, wait_s: float) -> str:
    """The first tray host to appear within `wait_s`: StatusNotifier, else (on X) XEmbed."""
    deadline = time.monotonic() + wait_s
    while True:
        if _sni_host_present():
            return "appindicator"
        if not wayland_only and _x_tray_owned():
            return "gtk"
        if time.monotonic() >= deadline:
            if wayland_only:
                raise TrayUnavailable(
                    "no StatusNotifier host on this Wayland desktop (on GNOME, "
                    "turn on the AppIndicator extension)"
                )
            raise TrayUnavailable(
                "no system tray on this desktop (no StatusNotifier host, no XEmbed tray)"
            )
        time.sleep(0.25)
