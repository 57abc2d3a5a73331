"""Which agent does a Job's next Run: its own, or the next one while the first waits.

A Job names one agent, or several in order (`owl add --agent claude,codex`,
stored joined by ","), and the config may name more for every Job
(`jobs.fallback = ["codex"]`). The next Run goes to the first of them that
is not waiting out a usage limit or a service backoff; when all of them
wait, the Job waits. A conversation cannot cross agents, so a Run that
changes agent starts fresh with the handoff, and each agent's own
conversation is kept for when the Job comes back to it.

Pure: names in, a name out.
"""

from __future__ import annotations

from collections.abc import Iterable


def names(job_agent: str | None, fallback: Iterable[str] = ()) -> list[str]:
    """The Job's agents in order: its own names, then the config's fallback."""
    out: list[str] = []
    for name in [*(job_agent or "").split(","), *fallback]:
        name = name.strip()
        if name and name not in out:
            out.append(name)
    return out


def choose(chain: list[str], waiting: Iterable[str]) -> str | None:
    """The first agent of `chain` that does not wait, or None when all of them do."""
    held = set(waiting)
    return next((n for n in chain if n not in held), None)


def run_agent(run_agent: str | None, chain: list[str]) -> str | None:
    """The agent that did a Run: as recorded, else (a Run from before agents were
    recorded) the Job's first."""
    return run_agent or (chain[0] if chain else None)
