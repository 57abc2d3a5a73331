"""macOS: signals, Quit, Cmd-Q and logout all end Owl the graceful way.

The main thread sits in AppKit's native run loop, where a Python
`signal.signal` handler runs only when something else wakes the loop, so
SIGTERM from launchd or `kill` would wait for the next menu change. PyObjC's
`MachSignals` delivers TERM, INT and HUP into the run loop instead.

Every way out goes through `NSApp.terminate_`, which asks the application
delegate `applicationShouldTerminate_`. That answer is "later": a thread
stops Owl the way Quit does everywhere (every Run asked to stop with SIGTERM,
killed 5 s later; the socket, database and watchdog closed), and only then
is AppKit told to go on terminating, which ends the process. Logout and
shutdown send the same question, so they wait for the Runs too. pystray's
own SIGINT handler calls `terminate_` as well and so takes the same path.

`DarwinToolkit` is the tray app's view of all this (see `owl.tray.toolkit`).
PyObjC is imported only here, and only on macOS (tests pass stand-ins).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Callable

from owl.tray.toolkit import Call, Toolkit

log = logging.getLogger("owl.tray")

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_TIMEOUT = 15.0  # the engine ends its Runs within about 6 s

_DELEGATE_CLASS: Any = None


def _delegate_class(foundation: Any) -> Any:
    """The NSObject subclass that answers AppKit (an Objective-C class can be
    defined only once per process)."""
    global _DELEGATE_CLASS
    if _DELEGATE_CLASS is None:

        class OwlApplicationDelegate(foundation.NSObject):  # type: ignore[misc, name-defined]
            def applicationShouldTerminate_(self, sender: Any) -> int:
                return self.owl_quit.should_terminate()

        _DELEGATE_CLASS = OwlApplicationDelegate
    return _DELEGATE_CLASS


class GracefulQuit:
    """Answers AppKit's "may I terminate?" by stopping Owl first."""

    def __init__(
        self,
        stop_owl: Callable[[], None],
        *,
        appkit: Any,
        foundation: Any,
        call_on_main: Callable[[Callable[[], None]], None],
    ) -> None:
        self._stop_owl = stop_owl
        self._appkit = appkit
        self._nsapp = appkit.NSApplication.sharedApplication()
        self._main = call_on_main
        self._lock = threading.Lock()
        self._started = False
        self._done = False
        self.delegate = _delegate_class(foundation).alloc().init()
        self.delegate.owl_quit = self

    def install(self, machsignals: Any) -> None:
        """Be the application's delegate; take TERM/INT/HUP inside the run loop."""
        self._nsapp.setDelegate_(self.delegate)
        for sig in SIGNALS:
            machsignals.signal(sig, self._on_signal)

    def quit(self) -> None:
        """Quit from any thread (the menu's Quit): the same path as Cmd-Q."""
        self._main(lambda: self._nsapp.terminate_(None))

    def _on_signal(self, signum: int) -> None:
        log.info("signal %s: stopping", signum)
        self._nsapp.terminate_(None)

    def should_terminate(self) -> int:
        ak = self._appkit
        with self._lock:
            if self._done:
                return ak.NSTerminateNow
            if not self._started:
                self._started = True
                threading.Thread(
                    target=self._stop_then_terminate, name="owl-quit", daemon=True
                ).start()
        return ak.NSTerminateLater

    def _stop_then_terminate(self) -> None:
        try:
            self._stop_owl()
        except Exception:
            log.exception("stopping Owl failed; terminating anyway")
        with self._lock:
            self._done = True
        self._main(lambda: self._nsapp.replyToApplicationShouldTerminate_(True))


def stopper(daemon: Any, before: Callable[[], None]) -> Callable[[], None]:
    """Stop the tray's refresher, then the daemon: every Run asked to stop,
    killed 5 s later, and everything closed (the process ends right after)."""

    def stop() -> None:
        before()
        close = getattr(daemon, "close", None)
        if close is not None:
            close()
        else:
            daemon.request_stop()
            wait = getattr(daemon, "wait", None)
            if wait is not None:
                wait(STOP_TIMEOUT)

    return stop


def install(daemon: Any, before_stop: Callable[[], None]) -> GracefulQuit:
    """Wire Owl's graceful stop into AppKit (call on the main thread, before
    the run loop starts)."""
    import AppKit  # type: ignore[import-not-found]
    import Foundation  # type: ignore[import-not-found]
    from PyObjCTools import AppHelper, MachSignals  # type: ignore[import-not-found]

    quit_ = GracefulQuit(
        stopper(daemon, before_stop),
        appkit=AppKit,
        foundation=Foundation,
        call_on_main=lambda fn: AppHelper.callAfter(fn),
    )
    quit_.install(MachSignals)
    return quit_


def be_accessory(appkit: Any, executable: str | None = None) -> bool:
    """Outside an app bundle, be a menu-bar accessory: no Dock icon, no menu
    bar of its own, and no "Quit Python" under Cmd-Q. Inside Owl.app the
    bundle's LSUIElement says the same before any code runs. Call on the
    main thread; True when the policy was set here."""
    from owl.bundle import app_bundle

    if app_bundle(executable) is not None:
        return False
    try:
        appkit.NSApplication.sharedApplication().setActivationPolicy_(
            appkit.NSApplicationActivationPolicyAccessory
        )
    except Exception as e:  # an old AppKit: a Dock icon is no reason to stop
        log.info("cannot become a menu-bar accessory: %s", e)
        return False
    return True


class DarwinToolkit(Toolkit):
    """pystray's darwin backend: AppKit's run loop on the main thread."""

    def __init__(self) -> None:
        import AppKit  # type: ignore[import-not-found]
        from PyObjCTools import AppHelper  # type: ignore[import-not-found]  # shipped with pyobjc

        self._apphelper = AppHelper
        be_accessory(AppKit)  # made on the main thread, before the icon

    def call_on_main(self, fn: Call) -> None:
        self._apphelper.callAfter(fn)

    def take_signals(self, stop: Call, daemon: Any, before_stop: Call) -> Call | None:
        return install(daemon, before_stop).quit

    def notifier(self) -> Any:
        """Inside Owl.app, notifications attributed to Owl rather than to Script
        Editor; outside it, osascript off the main thread (pystray's own runs
        it on the thread that asks, here the run loop's)."""
        from owl.tray.darwin_notify import OsascriptNotifier, make_notifier

        return make_notifier() or OsascriptNotifier()
