"""Small pieces of the review page: text made safe, times and durations in
words, the agent's little Markdown, Owl's icon inline.

Pure, like the page itself: strings in, HTML strings out.
"""

from __future__ import annotations

import functools
import html
import re
import time
from importlib import resources
from pathlib import Path
from typing import Any

from owl.rules import timefmt
from owl.review.text import visible

HEADING_MAX = 160


def esc(value: Any) -> str:
    """Text from anywhere, safe inside HTML and with its control characters shown."""
    return html.escape(visible("" if value is None else str(value)), quote=True)


def file_url(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).absolute().as_uri()
    except ValueError:
        return None


def when(ts: float | None) -> str:
    """A moment in Owl's one clock style (dated when not today)."""
    return timefmt.clock(ts, time.time()) if ts else "?"


def took(seconds: float | None) -> str:
    """A duration in Owl's one style: 9m 59s, 2h 5m."""
    return timefmt.duration(seconds)


def heading(job: dict[str, Any]) -> str:
    """The page's title: the prompt's first line, cut only when very long."""
    first = next((ln.strip() for ln in (job.get("prompt") or "").splitlines() if ln.strip()), "")
    first = first or job.get("title") or f"Job {job['id']}"
    return first if len(first) <= HEADING_MAX else first[: HEADING_MAX - 1].rstrip() + "…"


@functools.lru_cache(maxsize=1)
def logo() -> str:
    """Owl's own icon, inline (a data: URI is part of the file, not a fetch)."""
    try:
        import base64
        import io

        from PIL import Image

        with resources.files("owl.tray").joinpath("assets/owl.png").open("rb") as f:
            img = Image.open(f).convert("RGBA")
            img.thumbnail((96, 96))
            buf = io.BytesIO()
            img.save(buf, "PNG", optimize=True)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        return f'<img class="owl" alt="" width="48" height="48" src="data:image/png;base64,{data}">'
    except (OSError, ImportError, ValueError):
        return '<div class="owl" aria-hidden="true"></div>'


_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")


def prose(text: str) -> str:
    """An agent's message as HTML: escaped first, then `code`, **bold** and "- " lists
    (the little Markdown agents write), never any markup of the agent's own."""
    lines = []
    for line in esc(text.strip()).split("\n"):
        line = _BOLD.sub(r"<strong>\1</strong>", _CODE.sub(r"<code>\1</code>", line))
        stripped = line.lstrip()
        if stripped[:2] in ("- ", "* "):
            lines.append(
                f'<span class="li">{line[: len(line) - len(stripped)]}•&nbsp;{stripped[2:]}</span>'
            )
        elif stripped.startswith("#"):
            lines.append(f"<strong>{stripped.lstrip('#').strip()}</strong>")
        else:
            lines.append(line)
    return "\n".join(lines)
