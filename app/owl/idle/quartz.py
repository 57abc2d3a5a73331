"""macOS input and idle time through Quartz (PyObjC), with no permission it does not need.

Hooks: a *listen-only* Quartz event tap. It needs only Input Monitoring
(not Accessibility), runs its own CFRunLoop on a thread of its own, calls no
text-input API, and its callback only stamps the time and wakes a thread
that tells the monitor: a tap whose callback is slow is switched off by the
system.

The tap is made whether or not `CGPreflightListenEventAccess()` says the
grant is there: that answer can stay "no" after the person ticked the box,
until the process restarts, while the tap already gets events. Without the
grant macOS clears the keyboard from the tap's mask and keeps the mouse
(CGEventTapCreate's documentation); it returns no tap only when nothing is
left. So the hooks say once what to grant and to whom, ask macOS to list
the app (`CGRequestListenEventAccess`), and look again every few seconds:
a tap made before the grant is made anew once preflight says yes, a grant
taken away is logged and the tap made anew (mouse only), and a tap that
stops hearing the pointer while the HID system saw it move is dropped.

Even a granted tap gets no keystrokes under Secure Input (a password field,
Secure Keyboard Entry in a terminal, the lock screen: Apple's TN2150), so
the hooks say `may_miss_input`, and the idle policy reads the idle-time
counter every second while a Run is watched, events or not.

Reader: `CGEventSourceSecondsSinceLastEventType` on the HID system state, an
in-process call that needs no permission, in place of spawning `ioreg`; it
counts every key, Secure Input or not.

Quartz is imported only in `start`/`open` (a fake module stands in for
tests: `QuartzHooks(quartz=fake)`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from types import ModuleType
from typing import Any, Callable

from .base import BackendError, one_line

log = logging.getLogger("owl.idle")

GRANT_POLL = 3.0  # seconds between looks at the Input Monitoring grant
READY_TIMEOUT = 5.0
# A pointer move the HID system saw this long after the tap's last one: the tap is deaf.
DEAF_AFTER = 1.0
# CGEventType values the system sends to a tap it has switched off.
TAP_DISABLED_BY_TIMEOUT = 0xFFFFFFFE
TAP_DISABLED_BY_USER_INPUT = 0xFFFFFFFF
# Every kind of input a person makes (CGEventType names).
INPUT_EVENTS = (
    "kCGEventKeyDown",
    "kCGEventFlagsChanged",
    "kCGEventMouseMoved",
    "kCGEventLeftMouseDown",
    "kCGEventRightMouseDown",
    "kCGEventOtherMouseDown",
    "kCGEventLeftMouseDragged",
    "kCGEventRightMouseDragged",
    "kCGEventOtherMouseDragged",
    "kCGEventScrollWheel",
)


def load_quartz(quartz: ModuleType | None = None) -> ModuleType:
    """PyObjC's Quartz module (or the stand-in given), or BackendError."""
    if quartz is not None:
        return quartz
    try:
        import Quartz  # type: ignore[import-not-found]
    except Exception as exc:
        raise BackendError(f"PyObjC's Quartz cannot be loaded: {one_line(exc)}") from None
    return Quartz


#: Where a person grants it, as System Settings names it (macOS 13 and later).
SETTINGS_PATH = "System Settings › Privacy & Security › Input Monitoring"


def permission_message(app: str | None = None) -> str:
    """One line that says what to grant, where, and to whom."""
    if app is None:
        from owl.bundle import grantee

        app = grantee()
    return (
        f"Owl may not watch the keyboard: grant Input Monitoring to {app} "
        f"({SETTINGS_PATH}); until then "
        "keys are seen through the idle time, read once a second while a Run works"
    )


class QuartzHooks:
    """A listen-only event tap on the session, on a thread of its own."""

    name = "quartz"
    #: Secure Input keeps keystrokes from every event tap: the reader must be asked too.
    may_miss_input = True

    def __init__(
        self,
        quartz: ModuleType | None = None,
        *,
        grant_poll: float = GRANT_POLL,
        app: str | None = None,
    ) -> None:
        self._quartz = quartz
        self._grant_poll = grant_poll
        self._app = app
        self._q: Any = None
        self._on_event: Callable[..., None] | None = None
        self._on_dead: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._kick = threading.Event()
        self._tap: Any = None
        self._loop: Any = None
        self._tap_thread: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._asked = False
        self._tap_granted = False  # what preflight said when the tap was made
        self._tap_made = 0.0
        self._deaf_said = False
        self._moved: int = -1  # kCGEventMouseMoved
        self.last_event: float | None = None  # time.monotonic() of the last input
        self.last_pointer: float | None = None  # ... of the last pointer move

    # ------------------------------------------------------------- interface

    def start(self, on_event: Callable[..., None], on_dead: Callable[[str], None]) -> None:
        """Make the tap now (whatever preflight says), or wait for one to be allowed.

        Raises BackendError only when Quartz is missing or the system refuses
        a tap although preflight says the grant is there."""
        q = load_quartz(self._quartz)
        self.stop()
        self._q, self._on_event, self._on_dead = q, on_event, on_dead
        self._moved = int(q.kCGEventMouseMoved)
        self._stopping.clear()
        granted = self._granted()
        if not granted:
            self._ask()
        if not self._try_tap(granted) and granted:
            raise BackendError(
                "macOS refused an input event tap although Input Monitoring "
                f"is granted; {permission_message(self._app)}"
            )
        self._spawn(self._deliver, "owl-quartz-deliver")
        self._spawn(self._watch_grant, "owl-quartz-grant")

    @property
    def alive(self) -> bool:
        t = self._tap_thread
        return self._tap is not None and t is not None and t.is_alive()

    @property
    def waiting_for_grant(self) -> bool:
        """Started, and no tap yet or one made before preflight said yes."""
        return (
            self._on_event is not None
            and not self._stopping.is_set()
            and (self._tap is None or not self._tap_granted)
        )

    @property
    def missing_permission(self) -> tuple[str, str] | None:
        """(what is missing, one line saying where to grant it and to whom)
        while the tap waits for Input Monitoring (it hears the pointer only),
        else None."""
        if not self.waiting_for_grant:
            return None
        return "Input Monitoring", permission_message(self._app)

    def stop(self) -> None:
        self._stopping.set()
        self._kick.set()
        # The grant watcher may be making a tap right now: let it finish first.
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(1.0)
        self._threads = []
        self._drop_tap()
        self._kick.clear()

    # ------------------------------------------------------------- the tap

    def _callback(self, proxy: Any, type_: int, event: Any, refcon: Any) -> Any:
        # The hot path, on the tap's run loop: stamp, wake the deliverer, return.
        if type_ == TAP_DISABLED_BY_TIMEOUT or type_ == TAP_DISABLED_BY_USER_INPUT:
            tap = self._tap
            if tap is not None:
                self._q.CGEventTapEnable(tap, True)
            return event
        now = self.last_event = time.monotonic()
        if type_ == self._moved:
            self.last_pointer = now
        self._kick.set()
        return event

    def _mask(self) -> int:
        q = self._q
        mask = 0
        for name in INPUT_EVENTS:
            mask |= 1 << int(getattr(q, name))
        return mask

    def _try_tap(self, granted: bool) -> bool:
        """Make the tap; False when macOS gives none (nothing of the mask is
        allowed). `granted` is what preflight said, kept to notice a change."""
        q = self._q
        tap = q.CGEventTapCreate(
            q.kCGSessionEventTap,
            q.kCGHeadInsertEventTap,
            q.kCGEventTapOptionListenOnly,
            self._mask(),
            self._callback,
            None,
        )
        if tap is None:
            return False
        ready = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                source = q.CFMachPortCreateRunLoopSource(None, tap, 0)
                loop = q.CFRunLoopGetCurrent()
                q.CFRunLoopAddSource(loop, source, q.kCFRunLoopCommonModes)
                q.CGEventTapEnable(tap, True)
                box["loop"] = loop
            except Exception as exc:
                box["error"] = exc
                ready.set()
                return
            ready.set()
            q.CFRunLoopRun()
            if not self._stopping.is_set() and self._tap is tap:
                self._died("the event tap's run loop ended")

        thread = threading.Thread(target=run, name="owl-quartz-tap", daemon=True)
        thread.start()
        if not ready.wait(READY_TIMEOUT) or "error" in box:
            why = one_line(box["error"]) if "error" in box else "its thread did not start"
            q.CFMachPortInvalidate(tap)
            raise BackendError(f"the input event tap cannot run: {why}")
        with self._lock:
            self._tap, self._loop, self._tap_thread = tap, box["loop"], thread
            self._tap_granted, self._tap_made = granted, time.monotonic()
        return True

    def _drop_tap(self) -> None:
        with self._lock:
            tap, loop, thread = self._tap, self._loop, self._tap_thread
            self._tap = self._loop = self._tap_thread = None
        if tap is None:
            return
        q = self._q
        try:
            q.CGEventTapEnable(tap, False)
            q.CFMachPortInvalidate(tap)
            q.CFRunLoopStop(loop)
        except Exception:
            pass  # the run loop ends with its thread either way
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    # ------------------------------------------------------------- threads

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def _deliver(self) -> None:
        """Tell the monitor of input: once per wake, however many events came."""
        while True:
            self._kick.wait()
            if self._stopping.is_set():
                return
            self._kick.clear()
            on_event = self._on_event
            if on_event is not None:
                on_event()

    def _granted(self) -> bool:
        try:
            return bool(self._q.CGPreflightListenEventAccess())
        except Exception:
            return False

    def _ask(self) -> None:
        log.warning("%s", permission_message(self._app))
        if not self._asked:
            self._asked = True
            try:
                self._q.CGRequestListenEventAccess()  # lists Owl in System Settings
            except Exception:
                pass

    def _watch_grant(self) -> None:
        """Every few seconds: make a tap where there is none, make it anew when
        the grant comes or goes, drop it when it has gone deaf."""
        while not self._stopping.wait(self._grant_poll):
            try:
                self._look_again()
            except BackendError as exc:
                log.warning("input hooks: %s", exc)

    def _look_again(self) -> None:
        granted = self._granted()
        if self._tap is not None and granted != self._tap_granted:
            if granted:
                log.info(
                    "Input Monitoring granted: the input event tap is made anew "
                    "to hear the keyboard"
                )
            else:
                log.warning("Input Monitoring was taken away; %s", permission_message(self._app))
            self._drop_tap()
        elif self._tap is not None and self._deaf():
            if not self._deaf_said:
                self._deaf_said = True
                log.warning(
                    "the input event tap has stopped hearing the pointer (Input "
                    "Monitoring taken away?); %s",
                    permission_message(self._app),
                )
            self._drop_tap()
        if self._tap is None and self._try_tap(granted):
            log.info(
                "input hooks %s are live%s",
                self.name,
                "" if granted else " (the keyboard perhaps only once Input Monitoring is granted)",
            )

    def _deaf(self) -> bool:
        """The HID system saw the pointer move well after the tap's last move."""
        q = self._q
        try:
            quiet = float(
                q.CGEventSourceSecondsSinceLastEventType(
                    q.kCGEventSourceStateHIDSystemState, self._moved
                )
            )
        except Exception:
            return False
        if not math.isfinite(quiet) or quiet < 0:
            return False
        moved_at = time.monotonic() - quiet
        heard = max(self.last_pointer or 0.0, self._tap_made)
        if moved_at > heard + DEAF_AFTER:
            return True
        if self.last_pointer is not None and self.last_pointer > self._tap_made:
            self._deaf_said = False  # this tap has heard the pointer: say it again
        return False

    def _died(self, why: str) -> None:
        log.warning("input hooks %s stopped: %s", self.name, why)
        with self._lock:
            self._tap = None
        if self._on_dead is not None:
            self._on_dead(why)


class QuartzReader:
    """Seconds since the last input of any kind, from the HID system state."""

    name = "quartz-idle"

    def __init__(self, quartz: ModuleType | None = None) -> None:
        self._quartz = quartz
        self._q: Any = None

    def open(self) -> None:
        self._q = load_quartz(self._quartz)
        self.idle_seconds()

    def idle_seconds(self) -> float:
        q = self._q
        if q is None:
            raise BackendError("quartz reader is not open")
        try:
            value = float(
                q.CGEventSourceSecondsSinceLastEventType(
                    q.kCGEventSourceStateHIDSystemState, q.kCGAnyInputEventType
                )
            )
        except Exception as exc:
            raise BackendError(f"Quartz idle time failed: {one_line(exc)}") from None
        if not math.isfinite(value) or value < 0:
            raise BackendError(f"Quartz gave no idle time ({value})")
        return value

    def close(self) -> None:
        self._q = None


def darwin_plan(prefer: str | None = None) -> tuple[Any, list[Any]]:
    """(hooks, readers) for macOS: Quartz when PyObjC has it, else pynput
    and `ioreg`. ``prefer="pynput"`` forces the old pair."""
    import importlib.util

    from .ioreg import IoregReader
    from .pynput_hooks import PynputHooks

    if prefer != "pynput" and importlib.util.find_spec("Quartz") is not None:
        return QuartzHooks(), [QuartzReader(), IoregReader()]
    return PynputHooks("darwin"), [IoregReader()]
