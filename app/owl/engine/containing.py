"""A Run's agent command, contained: the person's `[sandbox]` settings applied.

The engine's side of `owl.sandbox`: which settings hold for this Run (the
config's `[sandbox]`, then the agent's own `[agents.NAME.sandbox]`), which of
Owl's folders the agent must not see, and the command as it starts inside
its sandbox with the label the views show. Fast: `sandbox.bwrap.probe` was
asked once at the daemon's start (`warm`), so nothing here starts a process;
where the Run's git lives comes from Owl's records (`owl.git.jobstore.Places`,
found by the setup off the engine thread), never from the worktree's files;
the host's list of bound unix sockets (`/proc/net/unix`) and the top of `/run`
are read, each a fraction of a millisecond (`bench/sandbox.py` times it).

`mode = "required"` and no sandbox to be had: the Run does not start
(`Refusal`), and its Job is blocked with the reason and the command that
fixes it; "auto" starts it uncontained and says so in its record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from owl.git import jobstore
from owl.sandbox import bwrap, contain, keys, policy
from owl.settings.config import Config
from owl.settings.paths import Paths


class Refusal(Exception):
    """`sandbox.mode = "required"`, and this Run cannot be contained here."""


def warm() -> str | None:
    """Ask once, before the engine starts, whether bwrap works here (a process):
    None when it does, else why not."""
    return bwrap.probe()


def settings_for(
    cfg: Config, agent: str, project: Mapping[str, object] | None = None
) -> policy.Settings:
    """The config's `[sandbox]`, the agent's own, then the project's, which only narrows."""
    base = keys.settings_from(cfg.sandbox or {})
    own = (cfg.agent(agent) or {}).get("sandbox") or {}
    out = base.for_agent(own) if isinstance(own, Mapping) else base
    return out.narrowed(project) if project else out


def owl_dirs(paths: Paths) -> list[str]:
    """Every folder of Owl's the agent must not see (this Run's worktree is let through)."""
    return sorted(
        {
            str(p)
            for p in (
                paths.config.parent,
                paths.db.parent,
                paths.logs,
                paths.worktrees,
                paths.runtime,
            )
        }
    )


def wrap(
    cfg: Config,
    paths: Paths,
    agent: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    worktree: Path,
    project: Path,
    narrowed: Mapping[str, object] | None = None,
    places: jobstore.Places | None = None,
) -> contain.Wrapped:
    """`argv` as the Run starts it; Refusal when it must be contained and cannot be.
    `narrowed`: the project's `.owl.toml` `[sandbox]`; `places`: where the
    Job's git lives (none: nothing of git is writable)."""
    settings = settings_for(cfg, agent, narrowed)
    w = contain.wrap(
        argv,
        settings=settings,
        agent=agent,
        env=env,
        worktree=places.worktree if places is not None else str(worktree),
        project=str(project),
        owl_dirs=owl_dirs(paths),
        git=git_places(places),
    )
    if settings.mode == "required" and not w.contained:
        raise Refusal(
            f'sandbox.mode is "required" and this Run cannot be contained '
            f"({w.label.removeprefix('not contained: ')}); install bubblewrap "
            '(sudo apt install bubblewrap), or set sandbox.mode = "auto"'
        )
    return w


def git_places(places: jobstore.Places | None) -> contain.GitPlaces:
    if places is None:
        return contain.GitPlaces()
    return contain.GitPlaces(places.store, places.admin, places.project_git)


def for_checks(
    cfg: Config,
    paths: Paths,
    worktree: Path,
    project: Path,
    narrowed: Mapping[str, object] | None = None,
    places: jobstore.Places | None = None,
) -> Callable[[list[str], dict[str, str]], tuple[list[str], dict[str, str]]]:
    """How a check's command starts (its argv and environment): contained as the Run's agent is, by the
    person's `[sandbox]` (and the project's narrowing), with no agent's own
    state. A check runs the project's tests, and the agent wrote them: what
    they do is the agent's doing, and reaches no further than the agent did.
    Raises OSError, which fails the check saying why, when it must be
    contained and cannot be."""

    def contain(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        # Checks run again on demand find the places here, on their own
        # thread; a Run's checks get the places its setup found.
        where = places if places is not None else jobstore.places(project, worktree)
        try:
            w = wrap(cfg, paths, CHECK, argv, env, worktree, project, narrowed, where)
            return w.argv, w.env
        except Refusal as e:
            raise OSError(str(e)) from None

    return contain


CHECK = "check"  # the name checks are contained under: no agent's own state
