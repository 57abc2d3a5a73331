"""How a cap's stop reads in a Run's reason, and how to know one again.

Apart from ``runcaps`` (the caps' values and rules) because ``owl status``
reads it, and a light command imports nothing it does not need: this module
imports nothing at all.
"""

from __future__ import annotations

STOPPED = "stopped: "  # every cap's reason begins so (see `is_cap_stop`)


def is_cap_stop(reason: str | None) -> bool:
    """Whether a Run's reason is one of the caps' (a stop of its own, not the person's)."""
    return bool(reason) and str(reason).startswith(STOPPED) and " runs." in str(reason)
