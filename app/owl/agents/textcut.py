"""Text cut to one readable line: what every log renderer shares."""

from __future__ import annotations

TEXT_LIMIT = 400  # assistant prose: enough to follow its reasoning
DETAIL_LIMIT = 160  # tool arguments and results: one screen line or so


def shorten(text: str, limit: int) -> str:
    """Whitespace runs (newlines too) become one space; long text ends in '…'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
