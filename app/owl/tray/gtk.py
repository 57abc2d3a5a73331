"""Linux/BSD: pystray's gtk (XEmbed) and appindicator (StatusNotifierItem) backends.

Both run GLib's main loop on the main thread, so work from other threads is
handed over with `GLib.idle_add`, and signals arrive through
`GLib.unix_signal_add` (a Python handler would wait for the loop to wake).
GTK is imported only here, and only once the backend is chosen.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

from owl.tray.toolkit import Call, Toolkit

log = logging.getLogger("owl.tray")


class GtkToolkit(Toolkit):
    """GTK 3 under pystray; see the module docstring."""

    @classmethod
    def environment(cls) -> dict[str, str]:
        """GTK would wait on an accessibility bus that may not exist (NO_AT_BRIDGE),
        and would set up OpenGL, which loads Mesa and LLVM (about 50 MB resident)
        for an icon and a menu that never draw with it (GDK_GL=disable)."""
        return {
            "NO_AT_BRIDGE": os.environ.get("NO_AT_BRIDGE", "1"),
            "GDK_GL": os.environ.get("GDK_GL", "disable"),
        }

    def __init__(self) -> None:
        from gi.repository import GLib

        self._glib = GLib
        # Window class "owl" (not the script's name), for window managers
        # and for finding the icon on screen.
        GLib.set_prgname("owl")
        GLib.set_application_name("Owl")
        # Stopping the gtk icon after the notification daemon has gone raises.
        self.loop_errors = (GLib.GError,)

    def call_on_main(self, fn: Call) -> None:
        def once() -> bool:
            try:
                fn()
            except Exception:
                log.exception("tray update failed")
            return False

        self._glib.idle_add(once)

    def take_signals(self, stop: Call, daemon: Any, before_stop: Call) -> Call | None:
        def on_signal(*_: Any) -> bool:
            stop()
            return False

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._glib.unix_signal_add(self._glib.PRIORITY_HIGH, sig, on_signal)
        return None

    def adopt(self, icon: Any) -> None:
        # GtkStatusIcon only pops the menu up on a right click; people click
        # tray icons with the left button too.
        status_icon = getattr(icon, "_status_icon", None)
        popup = getattr(icon, "_on_status_icon_popup_menu", None)
        if status_icon is not None and popup is not None:
            status_icon.connect("activate", lambda si: popup(si, 1, 0))

    def relabel(self, icon: Any, items: Any) -> bool:
        """Set the words and greyed-out items of pystray's Gtk.Menu where it is:
        a menu already open keeps its widgets, so a new one would show only at
        the next opening. Opening the menu is input that freezes a Run; the
        open menu then says so and its countdown moves, as the hover text does."""
        handle = getattr(icon, "_menu_handle", None)
        if handle is None:
            return False
        self._relabel(handle, items)
        if handle.get_visible():
            handle.reposition()  # open: wide enough for its new words, still on screen
        return True

    def _relabel(self, menu: Any, items: Any) -> None:
        for widget, it in zip(menu.get_children(), items):
            if it.separator:
                continue
            if it.default:  # pystray draws the heading bold through its label's markup
                widget.get_children()[0].set_markup(
                    "<b>%s</b>" % self._glib.markup_escape_text(it.label)
                )
            else:
                widget.set_label(it.label)
            widget.set_sensitive(it.enabled)
            sub = widget.get_submenu() if it.submenu is not None else None
            if sub is not None:
                self._relabel(sub, it.submenu)

    def set_tooltip(self, icon: Any, text: str) -> None:
        icon.title = text
        status_icon = getattr(icon, "_status_icon", None)
        if status_icon is not None:  # gtk: title is not the hover text
            status_icon.set_tooltip_text(text)
