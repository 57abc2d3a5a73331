"""What differs between pystray's backends, as far as the tray app is concerned.

One small interface, `Toolkit`, and one module per platform: `gtk` (the gtk
and appindicator backends, on GLib's loop), `darwin` (AppKit's run loop);
this class itself serves the rest (win32, dummy), where pystray's own loop
needs nothing more. `owl.tray.toolkits` picks the class once the backend is chosen
(`owl.tray.choose`); nothing here imports a toolkit.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

Call = Callable[[], None]

GTK_BACKENDS = ("gtk", "appindicator")


class Toolkit:
    """The toolkit under the icon: its thread, its signals, its quirks."""

    #: Errors the toolkit's loop may raise while it stops; the Runs must still end.
    loop_errors: tuple[type[BaseException], ...] = ()

    @classmethod
    def environment(cls) -> dict[str, str]:
        """Variables the toolkit reads once, while the icon is created."""
        return {}

    def call_on_main(self, fn: Call) -> None:
        """Run `fn` on the toolkit's thread (GTK and AppKit are not thread-safe)."""
        fn()

    def take_signals(self, stop: Call, daemon: Any, before_stop: Call) -> Call | None:
        """Make TERM and INT end the loop through `stop`.

        Returns the platform's own way to quit where `stop` must not be used
        (AppKit terminates itself, after Owl has stopped `daemon`), else None."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop())
        return None

    def notifier(self) -> Any:
        """A notifier to try before pystray's own `notify`, or None."""
        return None

    def adopt(self, icon: Any) -> None:
        """Fix what the backend gets wrong about `icon`, once it is made."""

    def relabel(self, icon: Any, items: Any) -> bool:
        """Give the menu on screen `items`' words in place (a menu of the same
        shape, `items.same_shape`); False where the toolkit cannot, and the
        menu is made anew instead."""
        return False

    def set_tooltip(self, icon: Any, text: str) -> None:
        """Make `text` the hover text."""
        icon.title = text
