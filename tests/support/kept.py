"""Where Owl keeps an agent's state for a daemon's contained Runs.

A contained Run's home is a folder of Owl's, and each agent's state folder
(~/.claude, ~/.codex, ~/.pi/agent, ...) is kept per agent and per project in
Owl's data folder (``owl.sandbox.ownhome``), bound at its place inside the
Run: what the agent writes there is found here, not in the person's home.
"""

from __future__ import annotations

from pathlib import Path

from owl.sandbox.ownhome import slug


def kept_state(owl_home: Path, agent: str, place: Path | str) -> list[Path]:
    """The host folders (one a project) of ``agent``'s state kept for the Runs
    of the daemon whose OWL_HOME is ``owl_home``; ``place``: where the Run
    sees that state (``HOME/.claude`` with the person's HOME, as given)."""
    agents = Path(owl_home) / "sandbox" / "projects"
    return sorted(agents.glob(f"*/agents/{slug(agent)}/{slug(str(place))}"))


def the_kept_state(owl_home: Path, agent: str, place: Path | str) -> Path:
    """The one such folder (the daemon's Runs were all in one project)."""
    found = kept_state(owl_home, agent, place)
    assert len(found) == 1, f"{agent}'s state for {place} kept in {found}"
    return found[0]
