"""Idle and input on Wayland compositors that speak an idle protocol (pywayland).

- `ext_idle_notifier_v1` (KDE Plasma 6, sway >= 1.8, Hyprland, niri, labwc,
  COSMIC). From version 2 on, `get_input_idle_notification` counts only
  input: an idle inhibitor (a video playing, a presentation) does not make
  the person look away. With version 1 only, an inhibitor holds the machine
  "in use" while it lasts, so nothing starts during a film, which is the
  safe side.
- `org_kde_kwin_idle` (KDE Plasma 5, sway 1.7), where ext-idle-notify is not
  offered. Its bindings are generated (see `wlproto`).

A notification says `idled` once input has stopped for its timeout and
`resumed` at the next input. Two are held: one at `idle.after`, which wakes
the engine when the machine becomes idle (`on_quiet`), and a short one
(`FINE`), which pins the moment of the last input to within a second so
`owl status` can say how long the machine has been quiet. Every `resumed` is
a hook event: that is what freezes a Run, within a few milliseconds.

The connection lives on a thread of its own, blocked in select() on the
display's fd and a wake pipe; nothing runs while nothing happens. The same
object is the monitor's hooks and its reader (how long since the last input,
worked out from the notifications, `Quiet`). The compositor going away ends
both: the machine then cannot be read.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import Any, Callable

from .base import BackendError, one_line
from .eventthread import EventThread

log = logging.getLogger("owl.idle")

EXT = "ext_idle_notifier_v1"
KDE = "org_kde_kwin_idle"
#: The short notification's timeout: how exactly the last input is known, in seconds.
FINE = 1.0
CONNECT_TIMEOUT = 2.0


class Quiet:
    """What idled/resumed notifications say about the last input (pure: no I/O, no clock)."""

    def __init__(self, now: float) -> None:
        self._idled: dict[float, float] = {}  # timeout -> when it said idled
        self._since = now  # the last resumed (or the start)

    def idled(self, timeout: float, now: float) -> None:
        self._idled[timeout] = now

    def resumed(self, now: float) -> None:
        self._idled.clear()
        self._since = now

    def idle_seconds(self, now: float) -> float:
        """Seconds since the last input; known once a notification has idled.

        Each idled one says "quiet since (when it idled - its timeout)"; it
        arrives a little after its timer, so each is a slight underestimate and
        the largest is the best (the long one's is always >= `after`, so the
        engine it wakes sees an idle machine). Before any has idled, input came
        within the shortest timeout: 0, so an engine waiting for `after` never
        wakes early on a guess; it is woken by the long notification anyway.
        """
        if not self._idled:
            return 0.0
        return max(0.0, max(now - at + timeout for timeout, at in self._idled.items()))


def _timeouts(after: float) -> list[float]:
    """The notifications to hold for `idle.after`: it, and FINE when shorter."""
    fine = min(FINE, after / 2)
    return sorted({round(after, 3), round(fine, 3)})


class WaylandIdle(EventThread):
    """Hooks and reader in one: a Wayland idle protocol on its own connection and thread."""

    thread_name = "owl-wayland-idle"
    what = "wayland idle"

    def __init__(
        self,
        display: str | None = None,
        *,
        protocols: tuple[str, ...] = (EXT, KDE),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.display_name = display  # None: WAYLAND_DISPLAY
        self.protocols = protocols  # in order of preference
        self.name = "wayland-idle"  # set to the protocol bound, on open
        self._clock = clock
        self._after = 600.0
        self._on_quiet: Callable[[], None] | None = None
        self._on_event: Callable[..., None] | None = None
        self._on_dead: Callable[[str], None] | None = None
        self._quiet = Quiet(clock())
        self._lock = threading.Lock()
        self._display: Any = None
        self._bound: dict[str, Any] = {}
        self._notes: list[Any] = []

    # --------------------------------------------------------------- reader

    def open(self) -> None:
        """Connect, and find the protocol; raise BackendError saying what is missing."""
        if self._display is not None and self._dead is None:
            return
        self._teardown()
        try:
            from pywayland.client import Display
        except Exception as exc:
            raise BackendError(f"pywayland cannot load: {one_line(exc)}") from None
        display = Display(self.display_name)
        try:
            display.connect()
        except Exception:
            where = self.display_name or os.environ.get("WAYLAND_DISPLAY") or "wayland-0"
            raise BackendError(f"cannot connect to the Wayland compositor at {where}") from None
        try:
            self._bound = _bind(display, self.protocols)
        except BackendError:
            _disconnect(display, [], {})
            raise
        self._display, self._dead, self._stopping = display, None, False
        self.name = self._bound["name"]
        self._quiet = Quiet(self._clock())
        self._arm()

    def idle_seconds(self) -> float:
        if self._display is None or self._dead is not None:
            raise BackendError(self._dead or "the Wayland compositor is not connected")
        with self._lock:
            return self._quiet.idle_seconds(self._clock())

    def close(self) -> None:
        pass  # the connection is the hooks' too; `stop` lets go of it

    # ---------------------------------------------------------------- hooks

    def watch_quiet(self, after: float, on_quiet: Callable[[], None]) -> None:
        self._on_quiet = on_quiet
        if after != self._after:
            self._after = after
            self._poke()

    def start(self, on_event: Callable[..., None], on_dead: Callable[[str], None]) -> None:
        self.open()
        if self._thread is not None and self._thread.is_alive():
            self._on_event, self._on_dead = on_event, on_dead
            return
        self._on_event, self._on_dead = on_event, on_dead
        self._start_thread(self._run)

    def _stopped(self) -> None:
        self._teardown()  # the thread has ended: nothing else reads the connection

    # --------------------------------------------------------------- thread

    def _arm(self) -> None:
        """(Re)create the notifications for the current `idle.after` (connection thread)."""
        for note in self._notes:
            _destroy(note)
        self._notes = []
        make = self._bound["make"]
        for timeout in _timeouts(self._after):
            note = make(int(timeout * 1000))
            note.dispatcher[self._bound["idled"]] = self._idled_cb(timeout)
            note.dispatcher["resumed"] = self._resumed
            self._notes.append(note)
        self._armed_for = self._after
        self._display.flush()

    def _idled_cb(self, timeout: float) -> Callable[..., None]:
        def idled(_note: Any) -> None:
            with self._lock:
                self._quiet.idled(timeout, self._clock())
            if timeout >= self._after and self._on_quiet is not None:
                self._on_quiet()

        return idled

    def _resumed(self, _note: Any) -> None:
        with self._lock:
            self._quiet.resumed(self._clock())
        if self._on_event is not None:
            self._on_event()

    def _run(self) -> None:
        display = self._display
        fd = display.get_fd()
        why = "the Wayland compositor went away"
        try:
            while not self._stopping:
                if self._after != self._armed_for:
                    with self._lock:
                        self._quiet.resumed(self._clock())  # new timers count from now
                    self._arm()
                display.dispatch(block=False)
                display.flush()
                if self._wait(fd):
                    display.read()
                    display.dispatch(block=False)
        except Exception as exc:  # read_events failing: the compositor closed the socket
            log.debug("wayland loop ended: %s", exc)
        finally:
            if self._stopping:
                self._teardown()
        self._ended(why, self._on_dead)

    def _teardown(self) -> None:
        display, self._display = self._display, None
        notes, self._notes = self._notes, []
        bound, self._bound = self._bound, {}
        if display is not None:
            _disconnect(display, notes, bound)


def _bind(display: Any, protocols: tuple[str, ...]) -> dict[str, Any]:
    """Bind a seat and the first offered idle protocol; say exactly what is missing."""
    from pywayland.protocol.wayland import WlSeat

    offered: dict[str, tuple[int, int]] = {}
    registry = display.get_registry()

    def on_global(_reg: Any, name: int, interface: str, version: int) -> None:
        offered.setdefault(interface, (name, version))

    registry.dispatcher["global"] = on_global
    _roundtrip(display, CONNECT_TIMEOUT)
    if WlSeat.name not in offered:
        raise BackendError("the Wayland compositor offers no seat")
    seat = registry.bind(offered[WlSeat.name][0], WlSeat, 1)
    for proto in protocols:
        if proto not in offered:
            continue
        name, version = offered[proto]
        if proto == EXT:
            from pywayland.protocol.ext_idle_notify_v1 import ExtIdleNotifierV1

            notifier = registry.bind(name, ExtIdleNotifierV1, min(version, 2))
            if version >= 2:
                make = lambda ms: notifier.get_input_idle_notification(ms, seat)  # noqa: E731
            else:
                make = lambda ms: notifier.get_idle_notification(ms, seat)  # noqa: E731
            return {
                "name": f"ext-idle-notify-v{min(version, 2)}",
                "make": make,
                "idled": "idled",
                "objects": [notifier, seat, registry],
            }
        from .wlproto.kde_idle import OrgKdeKwinIdle

        idle = registry.bind(name, OrgKdeKwinIdle, 1)
        return {
            "name": "kde-idle",
            "make": lambda ms: idle.get_idle_timeout(seat, ms),
            "idled": "idle",
            "objects": [idle, seat, registry],
        }
    raise BackendError(
        "the Wayland compositor offers no idle protocol (neither " + " nor ".join(protocols) + ")"
    )


def _roundtrip(display: Any, timeout: float) -> None:
    """display.roundtrip(), but a compositor that does not answer in time is an error,
    not a daemon hung at start."""
    done: list[bool] = []
    callback = display.sync()
    callback.dispatcher["done"] = lambda *_: done.append(True)
    fd = display.get_fd()
    deadline = time.monotonic() + timeout
    try:
        while not done:
            display.flush()
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise BackendError(f"the Wayland compositor did not answer within {timeout:g} s")
            display.read()
            display.dispatch(block=False)
    except BackendError:
        raise
    except Exception:
        raise BackendError(
            "the Wayland compositor went away while Owl asked what it offers"
        ) from None


def _disconnect(display: Any, notes: list[Any], bound: dict[str, Any]) -> None:
    """Destroy what was made, then disconnect, in that order: pywayland may crash
    if the display goes first and the proxies are finalised later."""
    try:
        for note in notes:
            _destroy(note)
        for obj in bound.get("objects", [])[:1]:
            _destroy(obj)
        display.flush()
    except Exception:
        pass
    try:
        display.disconnect()
    except Exception:
        pass


def _destroy(proxy: Any) -> None:
    """Send an object's destructor request (`destroy` or, in KDE's protocols, `release`)."""
    for name in ("destroy", "release"):
        method = getattr(type(proxy), name, None)
        if method is not None:
            method(proxy)
            return
