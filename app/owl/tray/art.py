"""The tray icon, drawn from code: an owl whose face says what Owl is doing.

Drawing in code rather than shipping bitmaps keeps every size and every
frozen-countdown frame crisp, and installs from a wheel without any asset
lookup. Each state differs in *shape* as well as colour, so it reads at a
glance on any panel and for people who do not tell the colours apart:

- ``idle``      slate owl, eyes shut (asleep: nothing to do)
- ``waiting``   blue owl, eyes half open (Jobs queued, waiting for the machine)
- ``working``   green owl, eyes wide open (a Run is running)
- ``frozen``    ice owl inside a ring that drains as the grace window passes
- ``paused``    amber owl whose eyes are the two bars of a pause sign
- ``attention`` red owl with a white "!" badge

Everything is drawn at four times the asked size on a 64-unit grid and
downsampled, which anti-aliases curves without blurring the silhouette.

This module is pure (Pillow only), so tests render it without a display.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from PIL import Image, ImageDraw

from owl.tray.wording import status_line  # one wording for the menu and the tooltip
from owl.rules.lifecycle import GRACE_DEFAULT

STATES: tuple[str, ...] = ("idle", "waiting", "working", "frozen", "paused", "attention")

# Body colour per state; face details are drawn in _INK and _WHITE.
_BODY = {
    "idle": (138, 148, 166),
    "waiting": (74, 144, 226),
    "working": (52, 178, 89),
    "frozen": (140, 215, 250),
    "paused": (242, 166, 35),
    "attention": (230, 60, 50),
    "app": (164, 112, 72),  # the application icon: a plain brown owl
}
_WHITE = (255, 255, 255)
_INK = (28, 30, 38)
_BEAK = (250, 196, 60)
_RING = (40, 170, 235)
_RING_TRACK = (110, 125, 140, 120)

_SUPERSAMPLE = 4
_GRID = 64.0
# The ink outline of the ear tips and of the body's bottom reaches past the
# 64-unit grid at full scale and was cut off flat; 0.93 keeps it whole.
_FIT = 0.93


def draw_icon(state: str, size: int, progress: float | None = None) -> Image.Image:
    """Return a square RGBA image of the owl in `state`, `size` pixels wide.

    `progress` is used by ``frozen`` only: how much of the grace window has
    already passed, 0..1 (None draws a full ring). The ring shows what is
    *left*, so it drains clockwise from twelve o'clock as time runs out.
    """
    if state not in STATES:
        raise ValueError(f"unknown icon state {state!r}; one of {', '.join(STATES)}")
    if size < 8:
        raise ValueError("an icon smaller than 8 px cannot show an owl")
    big = size * _SUPERSAMPLE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    k = big / _GRID

    if state == "frozen":
        _ring(d, k, 1.0 - _clamp(progress if progress is not None else 0.0))
        # The owl sits inside the ring, a little smaller.
        _owl(d, k, state, scale=0.66, cx=32.0, cy=33.0)
    else:
        _owl(d, k, state, scale=_FIT, cx=32.0, cy=32.0)
        if state == "attention":
            _badge_bang(d, k)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def draw_app_icon(size: int) -> Image.Image:
    """The application's own icon (menus, login items): a wide-eyed brown owl."""
    big = size * _SUPERSAMPLE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    _owl(ImageDraw.Draw(img), big / _GRID, "app", scale=1.0, cx=32.0, cy=32.0)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> tuple[int, int, int]:
    red, green, blue = (round(x + (y - x) * t) for x, y in zip(a, b))
    return red, green, blue


def _grow(poly: Sequence[tuple[float, float]], by: float) -> list[tuple[float, float]]:
    """Push a polygon's corners out from its centroid (a cheap outline)."""
    cx = sum(x for x, _ in poly) / len(poly)
    cy = sum(y for _, y in poly) / len(poly)
    out = []
    for x, y in poly:
        n = math.hypot(x - cx, y - cy) or 1.0
        out.append((x + (x - cx) / n * by * 1.8, y + (y - cy) / n * by * 1.8))
    return out


def _clamp(x: float) -> float:
    return 0.0 if x < 0 else 1.0 if x > 1 else float(x)


def _ring(d: ImageDraw.ImageDraw, k: float, left: float) -> None:
    """The grace-window ring: a faint full track, and the time left on it."""
    w = 7.0
    box = [
        (w / 2 + 0.5) * k,
        (w / 2 + 0.5) * k,
        (_GRID - w / 2 - 0.5) * k,
        (_GRID - w / 2 - 0.5) * k,
    ]
    d.ellipse(box, outline=_RING_TRACK, width=max(1, round(w * k)))
    if left <= 0:
        return
    colour = _RING if left > 0.25 else _BODY["attention"]
    if left >= 1:
        d.ellipse(box, outline=colour + (255,), width=max(1, round(w * k)))
    else:
        # Pillow measures angles clockwise from three o'clock.
        d.arc(
            box, start=-90, end=-90 + 360 * left, fill=colour + (255,), width=max(1, round(w * k))
        )


def _owl(
    d: ImageDraw.ImageDraw, k: float, state: str, *, scale: float, cx: float, cy: float
) -> None:
    """Body, ear tufts, face and beak, centred on (cx, cy) in grid units."""

    def p(x: float, y: float) -> tuple[float, float]:
        return ((cx + (x - 32) * scale) * k, (cy + (y - 32) * scale) * k)

    def box(x0: float, y0: float, x1: float, y1: float) -> list[float]:
        a, b = p(x0, y0), p(x1, y1)
        return [a[0], a[1], b[0], b[1]]

    body = _BODY[state] + (255,)
    disc = _mix(_BODY[state], _WHITE, 0.38) + (255,)
    edge = _INK + (255,)
    o = 2.2  # outline, so pale bodies still stand out on a light panel
    left_tuft = [(6, 3.5), (26, 14), (12, 25)]
    right_tuft = [(64 - x, y) for x, y in left_tuft]
    # Silhouette in ink, then the body over it, one outline width in.
    for tuft in (left_tuft, right_tuft):
        d.polygon([p(x, y) for x, y in _grow(tuft, o)], fill=edge)
    d.ellipse(box(5 - o, 9 - o, 59 + o, 63 + o), fill=edge)
    for tuft in (left_tuft, right_tuft):
        d.polygon([p(x, y) for x, y in tuft], fill=body)
    d.ellipse(box(5, 9, 59, 63), fill=body)
    # The facial disc: two pale rounds behind the eyes that make it an owl.
    for ex in (20.0, 44.0) if state != "paused" else ():  # bars read better bare
        d.ellipse(box(ex - 14.5, 31 - 14.5, ex + 14.5, 31 + 14.5), fill=disc)

    eyes = ((20.0, 31.0), (44.0, 31.0))
    r = 11.0
    if state == "idle":
        # Shut: a thick downward curve under each brow.
        for ex, ey in eyes:
            d.arc(
                box(ex - r + 2, ey - r + 1, ex + r - 2, ey + r - 3),
                start=20,
                end=160,
                fill=_INK,
                width=max(1, round(4.5 * k * scale)),
            )
    elif state == "waiting":
        # Half open: white lower halves with the pupil under a flat lid.
        for ex, ey in eyes:
            d.pieslice(box(ex - r, ey - r, ex + r, ey + r), start=0, end=180, fill=_WHITE)
            d.pieslice(box(ex - 5.5, ey - 5.5, ex + 5.5, ey + 5.5), start=0, end=180, fill=_INK)
            d.line([p(ex - r, ey), p(ex + r, ey)], fill=_INK, width=max(1, round(3 * k * scale)))
    elif state == "paused":
        # The eyes are the pause sign: two tall white bars.
        for ex, ey in eyes:
            d.rounded_rectangle(
                box(ex - 5, ey - 12, ex + 5, ey + 12), radius=3 * k * scale, fill=_WHITE
            )
    else:
        # Wide open: white disc, big pupil, a catch-light.
        for ex, ey in eyes:
            d.ellipse(box(ex - r, ey - r, ex + r, ey + r), fill=_WHITE)
            d.ellipse(box(ex - 6, ey - 5, ex + 6, ey + 7), fill=_INK)
            d.ellipse(box(ex - 3.5, ey - 3.5, ex - 0.5, ey - 0.5), fill=_WHITE)

    d.polygon([p(27, 42), p(37, 42), p(32, 51)], fill=_BEAK + (255,))


def _badge_bang(d: ImageDraw.ImageDraw, k: float) -> None:
    """A white disc with a red "!" in the lower right corner."""
    cx, cy, r = 47.0, 47.0, 16.0
    d.ellipse(
        [(cx - r) * k, (cy - r) * k, (cx + r) * k, (cy + r) * k],
        fill=_WHITE + (255,),
        outline=_INK + (255,),
        width=max(1, round(2 * k)),
    )
    red = _BODY["attention"] + (255,)
    d.rounded_rectangle(
        [(cx - 3.2) * k, (cy - 11) * k, (cx + 3.2) * k, (cy + 3) * k], radius=2 * k, fill=red
    )
    d.ellipse([(cx - 3.4) * k, (cy + 5.5) * k, (cx + 3.4) * k, (cy + 12.3) * k], fill=red)


# ------------------------------------------------------------ status -> state

_LIVE = ("running", "ending", "verifying")


def _frozen_runs(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in status.get("runs") or [] if r.get("state") == "frozen"]


def grace_progress(run: dict[str, Any], grace_window_s: float) -> float | None:
    """How much of a frozen Run's grace window has passed, 0..1, or None.

    The Run may carry its own window (``grace_window_s``); otherwise the
    configured one is used.
    """
    left = run.get("grace_left_s")
    if left is None:
        return None
    window = run.get("grace_window_s") or grace_window_s
    if not window or window <= 0:
        return None
    return _clamp(1.0 - float(left) / float(window))


def icon_state(
    status: dict[str, Any], grace_window_s: float = GRACE_DEFAULT
) -> tuple[str, float | None]:
    """Pick the icon's state (and frozen progress) from a status document.

    Order of precedence, most urgent for a person at the keyboard first:
    a Run whose freeze left part of it running (it is not frozen), a Run frozen by the machine counting down (the one nearest its end wins),
    the user's pause, a Run working, something needing attention, Jobs
    waiting for the machine, nothing to do.
    """
    if any(r.get("state") == "freezing" for r in status.get("runs") or []):
        return "attention", None  # a freeze that left some of a Run running
    counting = [r for r in _frozen_runs(status) if r.get("frozen_by") != "user"]
    if counting:

        def left(r: dict[str, Any]) -> float:
            v = r.get("grace_left_s")
            return float(v) if v is not None else math.inf

        nearest = min(counting, key=left)
        return "frozen", grace_progress(nearest, grace_window_s)
    if status.get("paused") or _frozen_runs(status):
        return "paused", None
    if any(r.get("state") in _LIVE for r in status.get("runs") or []):
        return "working", None
    if _attention_text(status) or status.get("review") or status.get("stuck"):
        return "attention", None  # something waits for the person
    if any(q.get("state") == "pending" for q in status.get("queue") or []):
        return "waiting", None
    return "idle", None


def _attention_text(status: dict[str, Any]) -> str | None:
    machine = status.get("machine") or {}
    return status.get("attention") or status.get("config_problem") or machine.get("problem") or None


def tooltip(status: dict[str, Any], grace_window_s: float = GRACE_DEFAULT) -> str:
    """The icon's state in words, one or two short lines."""
    lines = ["Owl: " + status_line(status)]
    note = _attention_text(status)
    if note:
        lines.append(note)
    return "\n".join(lines)
