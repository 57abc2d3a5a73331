"""A Run's agent command, contained: the person's `[sandbox]` settings applied.

The engine's side of `owl.sandbox`: which settings hold for this Run (the
config's `[sandbox]`, then the agent's own `[agents.NAME.sandbox]`), which of
Owl's folders the agent must not see, and the command as it starts inside
its sandbox with the label the views show. Fast: `sandbox.bwrap.probe` was
asked once at the daemon's start (`warm`), so nothing here starts a process;
where the Run's git lives comes from Owl's records (`owl.git.jobstore.Places`,
found by the setup off the engine thread), never from the worktree's files;
the host's lists of bound unix sockets (its own network namespace's and one
of each other namespace's, `owl.sandbox.hostsockets`) and the top of `/run`
are read from /proc, about a millisecond (`bench/sandbox.py` times it).

`mode = "required"` (the default on Linux) and no sandbox to be had: the Run
does not start. Its Job waits, neither spent nor blocked, with one line that
says why and what fixes it (`Watch`): the agents that must be contained are
held as an agent waiting out a usage limit is, and the sandbox is asked again
off this thread at the scheduling attempts while they wait (`REASK_FIRST`,
doubling to `REASK_MAX`, and at once when the machine is idle anew), so the
Jobs start by themselves once it works: the engine's side of that waiting is
`owl.engine.sandboxwait`, above the engine's state, of which `Watch` is part. "auto" starts the Run uncontained
and says so in its record and its log; "off" never contains.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from owl.git import jobstore
from owl.sandbox import contain, keys, policy, ready
from owl.settings.config import Config
from owl.settings.paths import Paths

log = logging.getLogger("owl.engine")

REASK_FIRST = 5.0  # while Jobs wait for a sandbox: ask again after this, doubling
REASK_MAX = 300.0


class Refusal(Exception):
    """`sandbox.mode = "required"`, and this Run cannot be contained here
    (`problem`: why, and what fixes it)."""

    def __init__(self, problem: str, words: str | None = None) -> None:
        super().__init__(words or waiting_words(problem))
        self.problem = problem


def warm() -> str | None:
    """Ask, before the engine starts, whether bwrap works here (a process):
    None when it does, else the line that says why not and what fixes it."""
    return ready.ask()


waiting_words = ready.waiting_words


@dataclass
class Watch:
    """The engine's view of whether Runs can be contained, and of the re-asking."""

    problem: str | None = None  # the last answer's line; None: they can (or not asked)
    next_at: float = 0.0  # the engine's clock: not asked again before this
    strikes: int = 0  # failed answers in a row
    asking: bool = False  # a probe is under way on its own thread
    held: set[int] = field(default_factory=set)  # Jobs turned back at their launch

    @classmethod
    def now(cls) -> Watch:
        """From the answer the daemon got before the engine started (nothing is run)."""
        answer = ready.last()
        return cls(problem=answer.problem if answer is not None else None)


def needs_sandbox(cfg: Config, agent: str) -> bool:
    """Whether `agent`'s Runs may start only contained (the config's word and the agent's)."""
    return settings_for(cfg, agent).mode == "required"


NET_SAID_MAX = 1024


def helped(label: str) -> bool:
    """Whether the Run's network is made by a helper that reports how it came
    out: its own network, or the allow-list's."""
    return ", own network" in label or ", network: allow-list" in label


def network_said(label: str, report: Path) -> tuple[str, bool]:
    """The Run's label as its network came out, from the helper's `report`
    (a small file of Owl's logs folder), and whether the helper has spoken:
    "contained: bwrap 0.8, own network; unix sockets: none" stays; a helper
    that failed makes it "contained: bwrap 0.8, no network: pasta: Failed to
    open() /dev/net/tun: …; unix sockets: none"."""
    try:
        with open(report, "rb") as f:
            said = f.read(NET_SAID_MAX).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return label, False
    except OSError:
        return label, True
    if not said:
        return label, True
    for net in (", own network", ", network: allow-list"):
        if net in label:
            head, rest = label.split(net, 1)
            tail = rest[rest.index(";") :] if ";" in rest else ""  # what it says of the rest
            return f"{head}, no network: {' '.join(said.split())}{tail}", True
    return label, True


SETUP_SAID_MAX = 300


def setup_failed(report: Path, lines: Sequence[str], code: int | None) -> str | None:
    """bwrap's own words when it failed at its own start, before the agent ran
    (netns.py wrote `report`, a file of Owl's logs folder the Run cannot see),
    else None. Then every line the start wrote (`lines`, the log from its
    offset) is bwrap's or Owl's, none the agent's: its first "bwrap: " line,
    else its last. Read on the agent's waiting thread, and the file removed."""
    try:
        with open(report, "rb") as f:
            said = f.read(NET_SAID_MAX).decode("utf-8", "replace").strip()
        report.unlink()
    except FileNotFoundError:
        return None
    except OSError:
        said = f"bwrap could not set up the sandbox (exit {code})"
    words = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("owl: ")]
    own = [ln for ln in words if ln.startswith("bwrap: ")]
    line = (own or words[-1:] or [said])[0]
    return line if len(line) <= SETUP_SAID_MAX else line[: SETUP_SAID_MAX - 3] + "..."


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
                own_places(paths),
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
    net_report: Path | None = None,
    setup_report: Path | None = None,
) -> contain.Wrapped:
    """`argv` as the Run starts it; Refusal when it must be contained and cannot be.
    `narrowed`: the project's `.owl.toml` `[sandbox]`; `places`: where the
    Job's git lives (none: nothing of git is writable); `net_report`: where the
    network helper says whether the Run got its network (`network_said`);
    `setup_report`: where it says that bwrap failed at its own start (`setup_failed`)."""
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
        net_report=str(net_report) if net_report is not None else None,
        setup_report=str(setup_report) if setup_report is not None else None,
        keep=str(own_places(paths)),
        held=str(held_credentials(paths)),
    )
    if w.refused:  # a held credential that may not be used: no mode mends it
        why = w.label.removeprefix("not started: ")
        raise Refusal(why, f"{agent}'s Runs wait: {why}")
    if settings.mode == "required" and not w.contained:
        raise Refusal(w.label.removeprefix("not contained: "))
    return w


def own_places(paths: Paths) -> Path:
    """Where the Runs' own homes, their projects' caches and their agents'
    state are kept (`owl.sandbox.ownhome`): beside the worktrees, in Owl's
    data folder (on macOS `~/.local/share/owl`, as the worktrees: a Run's
    home is its `HOME` there, and a path with a space breaks builds), out of
    every Run's view."""
    return paths.worktrees.parent / "sandbox"


def held_credentials(paths: Paths) -> Path:
    """Where the person puts a headless credential for an agent (one file per
    agent, 0600), passed into that agent's Runs as its variable."""
    return paths.config.parent / "credentials"


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
) -> Callable[[list[str], dict[str, str], Path], tuple[list[str], dict[str, str], tuple[str, ...]]]:
    """How a check's command starts (its argv, environment and covered sockets): contained as the Run's agent is, by the
    person's `[sandbox]` (and the project's narrowing), with no agent's own
    state. A check runs the project's tests, and the agent wrote them: what
    they do is the agent's doing, and reaches no further than the agent did.
    Raises OSError, which fails the check saying why, when it must be
    contained and cannot be."""

    def contain(
        argv: list[str], env: dict[str, str], setup_report: Path | None = None
    ) -> tuple[list[str], dict[str, str], tuple[str, ...]]:
        # Checks run again on demand find the places here, on their own
        # thread; a Run's checks get the places its setup found.
        where = places if places is not None else jobstore.places(project, worktree)
        try:
            w = wrap(
                cfg,
                paths,
                CHECK,
                argv,
                env,
                worktree,
                project,
                narrowed,
                where,
                setup_report=setup_report,
            )
            return w.argv, w.env, w.masked
        except Refusal as e:
            raise OSError(f"the check cannot be contained here: {e.problem}") from None

    return contain


CHECK = "check"  # the name checks are contained under: no agent's own state
