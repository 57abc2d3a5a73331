"""What the engine tells the notify room: small records, put on a queue.

The engine never waits on a channel: it builds one of these (from what it has
in hand at that moment) and hands it over; the notify thread does the rest.
Agent-written text in them is raw here and made safe where it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The kinds a person may name in `notify.urgent`.
KINDS = ("review", "blocked", "exhausted", "limit", "untouchable", "disk", "sandbox", "cap")


@dataclass(frozen=True)
class RunEnded:
    """A Run ended and its Job is now `state` (review, blocked, exhausted, pending, ...).

    Also a Job's checks run again on demand (`owl jobs verify`) that sent it
    to review: `run_id` is then 0, no Run's."""

    job_id: int
    run_id: int
    state: str
    title: str = ""
    reason: str | None = None  # why blocked or exhausted (or the Run's reason)
    last_message: str | None = None  # the agent's final message (agent text)
    checks: tuple[tuple[str, bool], ...] = ()  # (name, passed) of the Run's checks
    cost: float | None = None  # USD, when the agent says
    # whether `cost` is a bill (an API key's), or a subscription's
    # API-equivalent (False); None when the agent did not say
    billed: bool | None = None
    project: str = ""  # for the diffstat, read off the engine thread
    base: str | None = None
    branch: str | None = None
    log: str | None = None  # the Run's log: its last line, read off the engine thread


@dataclass(frozen=True)
class LimitWait:
    """An agent waits on a usage limit (or its service) until `until` (epoch)."""

    agent: str
    until: float
    reason: str
    since: float
    kind: str = ""  # a jobrules kind; "budget:…" for the headroom or the day's money


@dataclass(frozen=True)
class Window:
    """An agent's usage window as just read: the share used (1.0 all of it)."""

    agent: str
    window: str  # five_hour | seven_day
    used: float
    at: float


@dataclass(frozen=True)
class Untouchable:
    """A process of a Run that Owl may not signal (it became root, say)."""

    job_id: int
    run_id: int
    pid: int
    command: str
    why: str


@dataclass(frozen=True)
class CapStop:
    """A Run was stopped at one of its caps (runs.memory, runs.processes), or held
    frozen by the disk floor: `reason` names the cap and the figure."""

    job_id: int
    run_id: int
    title: str
    reason: str


@dataclass(frozen=True)
class DiskFull:
    """A record could not be written for want of room."""

    where: str
    detail: str = ""


@dataclass(frozen=True)
class JobGone:
    """The person dropped a Job, or accepted it: what an away spell said of it
    ("ready for review") is no longer news, and the briefing forgets it."""

    job_id: int


@dataclass(frozen=True)
class Uncontained:
    """Runs cannot be contained here and must be: their Jobs wait (`problem`: why, the fix)."""

    problem: str


@dataclass(frozen=True)
class Presence:
    """The person's presence changed: `away` since `since` (epoch), or back at `since`."""

    away: bool
    since: float


Event = (
    RunEnded
    | LimitWait
    | Window
    | Untouchable
    | CapStop
    | DiskFull
    | Uncontained
    | JobGone
    | Presence
)


@dataclass
class Stamp:
    """An event as the notify thread received it, with the wall time it came."""

    event: Event
    at: float
    extra: dict = field(default_factory=dict)  # facts read off the engine thread (diffstat)
