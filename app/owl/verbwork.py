"""The slow halves of verbs, done on the caller's thread, never the engine's.

Why: a verb arrives on a socket thread (or the tray's) and is carried out on
the engine thread, which must never wait on git or a project's files. So a
verb that needs git does it in two halves: what changes state runs on the
engine thread and returns its answer with a `LATER` step; `finish` then
runs that step here, on the caller's thread, to complete the answer (a
branch's commits and diffstat, a dropped Job's worktree removed). And `owl
add` reads its project (is it a repository, its `.owl.toml`, the agent)
here first, so the engine only writes the new Job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from owl import project as projectmod, workspace
from owl.errors import Refused

LATER = "_later"        # a key of an answer: a callable(answer) -> answer, run off the engine


def finish(answer: Any) -> Any:
    """Run the answer's LATER step, if it has one, and return the full answer."""
    if isinstance(answer, dict) and LATER in answer:
        later = answer.pop(LATER)
        answer = later(answer)
    return answer


def prepare_add(cfg: Any, prompt: str, project: str, agent: str | None) -> dict:
    """What `owl add` needs to know about its project, found with git: the
    repository's root, its `.owl.toml`, the agent and whether it can run."""
    from owl import agents

    root = workspace.project_root(project)
    try:
        settings = projectmod.load(Path(root))
    except projectmod.ProjectError as e:
        raise Refused(str(e)) from None
    except (OSError, workspace.WorkspaceError):
        settings = projectmod.ProjectSettings()
    name = (agent or cfg.projects.get(str(root), {}).get("agent") or settings.agent
            or cfg.default_agent)
    try:
        driver = agents.get_driver(name, cfg.agent(name))
    except ValueError as e:
        raise Refused(str(e)) from None
    problem = driver.problem()
    if problem:
        raise Refused(problem)
    return {"root": str(root), "agent": name, "prompt": prompt}
