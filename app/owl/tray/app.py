"""The tray app: a pystray icon on the main thread over a running daemon.

`run_tray(daemon)` blocks in the toolkit's loop until Quit (or SIGTERM /
SIGINT), then asks the daemon to end its Runs the way `owl daemon` does (a
tray joined to a daemon in another process, `owl.tray.remote`, quits alone).
A watcher thread waits on the daemon's changes (`wait_change`: a Job added,
a Run started, frozen or ended) and wakes the refresher at once; the
refresher reads `daemon.status()` then, and every second while a countdown
is on screen (every few seconds otherwise, as a fallback); it redraws the
icon, tooltip and menu only when they changed, and hands every change to the
main thread (GTK and AppKit are not thread-safe). Menu clicks that ask the daemon run
on a short-lived thread so a slow verb never freezes the menu.

The backend is chosen first (`owl.tray.choose`, whose `choose_backend`
and `TrayUnavailable` callers import from here), and what differs between
backends (the toolkit's thread, signals, quirks of the icon) lives behind
`owl.tray.toolkit.Toolkit`, one module per platform.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from owl import textsafe
from owl.errors import Refused
from owl.tray.art import draw_icon, icon_state, tooltip
from owl.tray.choose import HOST_WAIT_S, TrayUnavailable, choose_backend
from owl.tray.coming_back import DEFAULT_ACTION, ComingBack
from owl.tray.items import Action, Item, same_shape
from owl.tray.menu import build_menu, counting_down
from owl.tray.notices import Notices
from owl.tray.toolkits import toolkit_environment, toolkit_for
from owl.rules.lifecycle import GRACE_DEFAULT


log = logging.getLogger("owl.tray")

# While a Run is live the person who just sat down is looking at the icon:
# it must turn frozen within a second of their first key press, not four.
FAST_S = 1.0  # refresh period while a Run is live or a countdown is on screen
SLOW_S = 4.0  # otherwise (nothing running: only the queue can change)
ICON_SIZE = 64  # hosts scale down; 64 keeps 2x panels sharp
PROGRESS_STEPS = 60  # redraw the frozen ring at most this many times per window
DOUBLE_FIRE_S = 0.3  # the same item twice within this is one click
WATCH_S = 25.0  # one wait for the daemon's next change


_VERB_WORDS = {
    "start": "Start",
    "pause": "Pause",
    "resume": "Resume",
    "stop": "Stop",
    "shift_start": "Work for 1 hour",
    "drop": "Drop",
    "accept": "Accept",
    "verify": "Run checks again",
}
# Verbs whose outcome the person waits to hear (a merge, checks started).
_SAYS_DONE = {"accept", "verify"}


class DaemonLike(Protocol):
    def status(self) -> dict: ...
    def call(self, verb: str, **args: Any) -> dict: ...
    def request_stop(self) -> None: ...
    def wait_change(self, since: int, timeout: float) -> int: ...


# ------------------------------------------------------------------ the app


def open_path(path: str) -> None:
    """Open a file or folder with the desktop's opener, detached from Owl."""
    opener = "open" if sys.platform == "darwin" else "xdg-open"
    subprocess.Popen(
        [opener, path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def to_pystray(items: tuple[Item, ...], on_action: Callable[[Action], None]) -> Any:
    """The plain menu model as a pystray.Menu."""
    from pystray import Menu, MenuItem

    def one(it: Item) -> Any:
        if it.separator:
            return Menu.SEPARATOR
        if it.submenu is not None:
            return MenuItem(it.label, Menu(*[one(s) for s in it.submenu]), enabled=it.enabled)
        action = it.action
        return MenuItem(
            it.label,
            (lambda icon, item: on_action(action)) if action else None,
            enabled=it.enabled,
            default=it.default,
            checked=(lambda item, c=it.checked: c) if it.checked is not None else None,
        )

    return Menu(*[one(it) for it in items])


class TrayApp(ComingBack):
    """Keeps the icon in step with the daemon and carries out menu actions."""

    def __init__(
        self,
        daemon: DaemonLike,
        backend: str,
        *,
        grace_window_s: float = GRACE_DEFAULT,
        autostart: Any = None,
        slow_s: float = SLOW_S,
    ) -> None:
        import pystray

        self.daemon = daemon
        self.backend = backend
        self.grace_window_s = grace_window_s
        self.slow_s = slow_s
        self._autostart = autostart
        self._toolkit = toolkit_for(backend)()
        self._main = self._toolkit.call_on_main
        self._stopping = threading.Event()
        self._poke = threading.Event()
        self._notices = Notices()
        self._buttons: Any = None
        self._buttons_ok: bool | None = None
        self._shown: dict[str, Any] = {}
        self._last_action: tuple[Action] | None = None
        self._last_action_at = 0.0
        self._native_quit: Callable[[], None] | None = None  # AppKit's terminate on macOS
        self._bundle_notifier: Any = self._toolkit.notifier()  # macOS inside Owl.app: as Owl
        self.owns_daemon = bool(getattr(daemon, "owns_daemon", True))
        self.icon = pystray.Icon("owl", draw_icon("idle", ICON_SIZE), "Owl")
        self._toolkit.adopt(self.icon)

    # -- lifecycle

    def run(self) -> int:
        self._native_quit = self._toolkit.take_signals(self.stop, self.daemon, self._end_refresher)
        try:
            self.icon.run(setup=self._refresher)
        except self._toolkit.loop_errors as e:
            # e.g. stopping the gtk icon after the notification daemon has
            # gone; the Runs must still be ended below.
            log.warning("tray stopped with an error: %s", e)
        finally:
            self._stopping.set()
            if self._buttons is not None:
                self._buttons.close()
            self._release_setup()
            self.daemon.request_stop()
        return 0

    def _release_setup(self) -> None:
        """Let pystray's setup thread end when the loop never became ready.

        The thread waits for the loop's "ready" before calling `_refresher`;
        a loop that failed at start (e.g. its notification service could not
        be started) never says it, and that (non-daemon) thread would keep
        the process alive for good. One more "ready" is harmless otherwise."""
        ready = getattr(self.icon, "_Icon__queue", None)
        if ready is not None:
            ready.put(True)

    def stop(self) -> None:
        """End the loop (from any thread); `run` then ends the Runs. On macOS
        AppKit is asked to terminate, and Owl stops before it does."""
        if self._native_quit is not None:
            self._native_quit()
            return
        self._stopping.set()
        self._poke.set()
        self._main(self.icon.stop)

    def _end_refresher(self) -> None:
        self._stopping.set()
        self._poke.set()

    # -- refreshing

    def _refresher(self, icon: Any) -> None:
        if self._stopping.is_set():
            return  # released after the loop failed: nothing to show
        # Shown from the toolkit's thread like every other change: pystray's
        # darwin backend sets the status item's image, tooltip and visibility
        # right here, and AppKit allows that only on the main thread.
        self._main(lambda: setattr(icon, "visible", True))
        threading.Thread(target=self._watch, name="owl-tray-watch", daemon=True).start()
        self._buttons_on()  # D-Bus set-up here, not on the toolkit's thread
        while not self._stopping.is_set():
            status = self.refresh()
            fast = status is not None and (counting_down(status) or bool(status.get("runs")))
            self._poke.wait(min(FAST_S, self.slow_s) if fast else self.slow_s)
            self._poke.clear()

    def _watch(self) -> None:
        """Wake the refresher at each change of the daemon's (an event, not a poll).
        A joined daemon that goes away (`owl daemon stop`) closes this tray."""
        from owl.errors import NoDaemon

        wait = getattr(self.daemon, "wait_change", None)
        if wait is None:
            return
        seen, gone = 0, 0
        while not self._stopping.is_set():
            try:
                now = wait(seen, WATCH_S)
                gone = 0
            except NoDaemon:
                gone += 1
                if gone >= 2 and not self.owns_daemon:
                    log.warning("the daemon has gone; closing the tray")
                    self.stop()
                    return
                self._stopping.wait(0.5)
                continue
            except Exception as e:  # a daemon stopping, a bad answer: poll meanwhile
                log.info("waiting for the daemon's changes: %s", e)
                self._stopping.wait(1.0)
                continue
            if now != seen:
                seen = now
                self._poke.set()

    def refresh(self) -> dict | None:
        """Read the status once and push whatever changed to the icon."""
        try:
            status = self.daemon.status()
        except Exception as e:  # the tray must outlive a bad status read
            log.warning("status failed: %s", e)
            status = {"attention": f"status cannot be read: {e}"}
        state, progress = icon_state(status, self.grace_window_s)
        if progress is not None:
            progress = round(progress * PROGRESS_STEPS) / PROGRESS_STEPS
        look = (state, progress)
        if self._shown.get("look") != look:
            self._shown["look"] = look
            image = draw_icon(state, ICON_SIZE, progress)
            self._main(lambda: setattr(self.icon, "icon", image))
        model = build_menu(status, autostart_on=self._autostart_on(), owns_daemon=self.owns_daemon)
        before = self._shown.get("menu")
        if before != model:
            self._shown["menu"] = model
            menu = to_pystray(model, self.on_action)
            in_place = before is not None and same_shape(before, model)

            def show() -> None:
                # the open menu follows: relabelled in place where only words changed
                if not (in_place and self._toolkit.relabel(self.icon, model)):
                    self.icon.menu = menu

            self._main(show)
        tip = tooltip(status, self.grace_window_s)
        if self._shown.get("tip") != tip:
            self._shown["tip"] = tip
            # Two hops: pystray's gtk backend itself defers the menu rebuild
            # by one hop, so the hover text changes only after the menu has,
            # and what it says can already be found in the menu.
            self._main(lambda: self._main(lambda: self._set_tooltip(tip)))
        for notice in self._notices.update(status):
            review = getattr(notice, "review", None)
            self._main(functools.partial(self._notify, notice[0], notice[1], review=review))
        self._shown["status"] = status
        return status

    def _set_tooltip(self, text: str) -> None:
        self._toolkit.set_tooltip(self.icon, textsafe.block(text))

    def _notify(self, title: str, message: str, review: int | None = None) -> None:
        # Bodies carry agent text (titles, reasons); a notification server may
        # read markup or act on controls, so both go through textsafe.
        title, message = textsafe.line(title), textsafe.block(message)
        if review is not None and self._buttons_on():
            shown = self._buttons.notify(
                title, message, [(DEFAULT_ACTION, "Review"), ("review", "Review")], tag=str(review)
            )
            if shown is not None:
                return
        if self._bundle_notifier is not None and self._bundle_notifier.notify(title, message):
            return
        try:
            self.icon.notify(message, title)
        except Exception as e:  # no notification daemon: the menu still says it
            log.info("notification not shown: %s", e)

    def _autostart_on(self) -> bool:
        try:
            return bool(self._autostart_module().status()[0])
        except Exception:
            return False

    def _autostart_module(self) -> Any:
        if self._autostart is None:
            from owl import autostart

            self._autostart = autostart
        return self._autostart

    # -- actions

    def on_action(self, action: Action) -> None:
        """Carry out a menu click. Runs on the toolkit's thread: stay quick."""
        now = time.monotonic()
        if self._last_action == (action,) and now - self._last_action_at < DOUBLE_FIRE_S:
            return  # appindicator may deliver one click twice after a menu update
        self._last_action, self._last_action_at = (action,), now
        if action.kind == "quit":
            self.stop()
        elif action.kind == "verb":
            threading.Thread(
                target=self._call, args=(action,), name="owl-tray-verb", daemon=True
            ).start()
        elif action.kind == "open" and action.path:
            self._open(action.path)
        elif action.kind == "review":
            threading.Thread(
                target=self._review,
                args=(int(action.kwargs["job_id"]),),
                name="owl-tray-review",
                daemon=True,
            ).start()
        elif action.kind == "config":
            from owl.settings.paths import get_paths

            config = get_paths().config
            self._open(str(config if config.exists() else config.parent))
        elif action.kind == "autostart":
            mod = self._autostart_module()
            try:
                mod.enable() if action.kwargs.get("on") else mod.disable()
            except OSError as e:
                self._notify("Start at login", f"cannot change it: {e}")
            self._poke.set()

    def _call(self, action: Action) -> None:
        words = _VERB_WORDS.get(action.verb or "", action.verb or "Owl")
        if action.verb == "accept" and action.kwargs.get("merge"):
            words = "Merge"
        try:
            out = self.daemon.call(action.verb or "", **action.kwargs)
            if action.verb in _SAYS_DONE and isinstance(out, dict) and out.get("message"):
                said = str(out["message"])
                self._main(lambda: self._notify(words, said))
        except Refused as e:
            reason = str(e)
            title = words + ": refused"
            self._main(lambda: self._notify(title, reason))
        except Exception as e:
            log.exception("verb %s failed", action.verb)
            reason = f"{action.verb} failed: {e}"
            self._main(lambda: self._notify("Owl", reason))
        self._poke.set()

    def _open(self, path: str) -> None:
        if not Path(path).exists():
            self._notify("Owl", f"{path} does not exist")
            return
        try:
            open_path(path)
        except OSError as e:
            self._notify("Owl", f"cannot open {path}: {e}")


def _configured_grace_window() -> float:
    try:
        from owl.settings import config
        from owl.settings.paths import get_paths

        path = get_paths().config
        return config.load(path).grace_window if path.exists() else config.Config().grace_window
    except Exception:
        return GRACE_DEFAULT


def run_tray(
    daemon: DaemonLike,
    *,
    backend: str | None = None,
    host_wait_s: float = HOST_WAIT_S,
    slow_s: float = SLOW_S,
) -> int:
    """Show Owl in the tray over `daemon` until Quit; returns the exit code.

    `slow_s` is how often the status is read when no Run is live (once a
    second while one is). `host_wait_s` is how long to wait for a
    tray host to appear (a login item may start before the panel).

    Must be called on the main thread (macOS requires it, and GTK's signal
    handling lives there). Raises TrayUnavailable, before touching the
    daemon, when this desktop has no usable tray: run headless then.
    """
    name = choose_backend(backend, wait_s=host_wait_s)
    try:
        with toolkit_environment(name):
            app = TrayApp(daemon, name, grace_window_s=_configured_grace_window(), slow_s=slow_s)
    except Exception as e:
        raise TrayUnavailable(f"the {name} tray cannot start: {e}") from e
    return app.run()
