"""Whether a cost an agent reported is a bill, and the words that say so.

Agents report a dollar figure however they are signed in: Claude Code counts
`total_cost_usd` at API list prices on a subscription (Pro/Max, signed in with
OAuth) just as it does on an API key. On an API key that figure is the bill; on
a subscription nothing is billed per token, and the figure is only what the
same work would have cost on the API. Saying "$4.20" of a subscription's night
reads as money spent; it is not.

How Owl knows which: from what the agent itself says of its sign-in, recorded
with the Run's usage as `billed` (True: an API key's bill; False: a
subscription's API-equivalent; absent or None: the agent did not say). Claude
Code says it in its stream's `init` event (`apiKeySource`: "none" when it runs
on its OAuth sign-in, the key's source otherwise). Agents that do not say are
shown as they report, without a word either way.

`budget.daily_usd` and `budget.run_usd` limit the figure whatever it is: on a
subscription they bound the API-equivalent, not a bill.

Pure: no clock, no store, nothing of Owl's imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BILLED = "billed"
EQUIVALENT = "api-equivalent"
MIXED = "mixed"
UNSAID = "as-reported"
KINDS = (BILLED, EQUIVALENT, MIXED, UNSAID)

NOT_BILLED = "API-equivalent, not billed"


def _all(part: float, whole: float) -> bool:
    """`part` is all of `whole`, but for a float's rounding."""
    return whole - part <= max(1e-9, whole * 1e-6)


def billed_of(usage: Mapping[str, Any] | None) -> bool | None:
    """What a Run's recorded usage says of its cost: billed, not billed, or not said."""
    v = (usage or {}).get("billed")
    return v if isinstance(v, bool) else None


def kind_of(billed: bool | None) -> str:
    """One Run's cost kind, as `--json` gives it."""
    return UNSAID if billed is None else BILLED if billed else EQUIVALENT


def total_kind(usd: float, billed: float, unbilled: float) -> str | None:
    """The kind of a total of `usd`, of which `billed` is known to be a bill and
    `unbilled` known not to be; None when there is no money to speak of."""
    if usd <= 0:
        return None
    if _all(unbilled, usd):
        return EQUIVALENT
    if _all(billed, usd):
        return BILLED
    return MIXED if unbilled > 0 else UNSAID


def total_billed(usd: float, billed: float, unbilled: float) -> bool | None:
    """A total is a bill (True), not billed (False), or neither can be said (None)."""
    kind = total_kind(usd, billed, unbilled)
    return True if kind == BILLED else False if kind == EQUIVALENT else None


def said(usd: float, billed: bool | None, digits: int = 2) -> str:
    """One Run's cost: '$1.84', or '$1.84 (API-equivalent, not billed)'."""
    money = f"${usd:.{digits}f}"
    return f"{money} ({NOT_BILLED})" if billed is False else money


def part(usd: float, unbilled: float, digits: int = 2) -> str:
    """What of a total is no bill: 'API-equivalent, not billed' (all of it),
    '$2.00 of it API-equivalent, not billed', or '' (none of it)."""
    if unbilled <= 0 or usd <= 0:
        return ""
    if _all(unbilled, usd):
        return NOT_BILLED
    return f"${unbilled:.{digits}f} of it {NOT_BILLED}"


def said_total(usd: float, unbilled: float, digits: int = 2) -> str:
    """A total: '$3.10', '$3.10 (API-equivalent, not billed)', or, when only
    part of it is, '$3.10 ($2.00 of it API-equivalent, not billed)'."""
    p = part(usd, unbilled, digits)
    return f"${usd:.{digits}f}" + (f" ({p})" if p else "")


def job_billed(values: list[bool | None]) -> bool | None:
    """The Runs of a Job together: billed or not when every Run that said agrees."""
    known = {v for v in values if v is not None}
    return known.pop() if len(known) == 1 and None not in values else None
