"""What every idle backend is: a hook (input arrives as events) or a reader
(asked "how long since the last input?").

Backends live one per module and are chosen at start by `owl.idle.choose`.
A backend never raises anything but `BackendError` out of its methods, so the
monitor can fall back to the next one without guessing what went wrong.
"""

from __future__ import annotations

from typing import Callable, Protocol


class BackendError(Exception):
    """A backend cannot work (now). str() is one line a person can act on."""


def one_line(exc: BaseException) -> str:
    """The first line of an exception's text (pynput's ImportError has ten)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Reader(Protocol):
    """Answers "seconds since the last input" when asked; no threads, no timers."""

    name: str

    def open(self) -> None:
        """Connect and probe once; raise BackendError if this cannot work here."""

    def idle_seconds(self) -> float:
        """Seconds since the last input; raise BackendError if the source is gone."""

    def close(self) -> None:
        """Let go of connections. Safe to call twice, or after a failure."""


class Hooks(Protocol):
    """Delivers every input event to a callback, from a thread of its own."""

    name: str

    def start(self, on_event: Callable[..., None], on_dead: Callable[[str], None]) -> None:
        """Start listening; raise BackendError if input cannot be hooked here.

        `on_event` is called on every event (any arguments); `on_dead(why)` if
        the hooks stop without being asked to (e.g. the X server went away).
        """

    @property
    def alive(self) -> bool:
        """True while events are being delivered."""

    def stop(self) -> None:
        """Stop listening. Safe to call twice, or after the hooks died."""


class QuietWatch(Hooks, Protocol):
    """Hooks that also know when input has stopped (Mutter's watches, Wayland's
    idle protocols), so nobody need poll to find out."""

    def watch_quiet(self, after: float, on_quiet: Callable[[], None]) -> None:
        """Call `on_quiet` (from the hooks' thread) each time input has stopped
        for `after` seconds. May be called again, before or after `start`,
        when `idle.after` is edited."""
