"""How a person counts a Job's attempts, Run by Run: one rule for every view.

Pure (Runs as the rows the Store gives), so the review page and the status
views number them alike.
"""

from __future__ import annotations

from typing import Any


def attempt_numbers(runs: list[dict[str, Any]]) -> list[int | None]:
    """Each Run's attempt as the person counts them: a Run that cost nothing
    (interrupted: you came back, you stopped it) is no attempt (None); a failed
    one is the attempt it spent; a live or succeeded one is the next attempt.
    So "attempt 2" beside "1 of 3 left" never disagree."""
    spent = 0
    out: list[int | None] = []
    for r in runs:
        if r.get("outcome") == "interrupted":
            out.append(None)
            continue
        out.append(spent + 1)
        if r.get("outcome") == "failed":
            spent += 1
    return out
