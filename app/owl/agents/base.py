"""What every agent driver shares: the facts of one Run, and the driver contract.

A driver only *describes* how to start its agent (argv and extra environment);
it never spawns anything. The engine owns processes, so drivers stay pure
enough to test without running an agent, and a new agent is one small module.

What a Run spent is told through the driver's `Report` (`owl.rules.budget`
decides what it allows), in these words only:

- `Report.usage`: `total_cost_usd` (dollars, where the agent states them;
  None where it does not), and the tokens it counted as `input_tokens`,
  `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`
  (any it has). The money caps count `total_cost_usd`; the token caps count
  input plus output tokens.
- `Report.windows`: the usage windows a subscription's agent reported
  (`budget.Reading`: FIVE_HOUR or SEVEN_DAY, the share used with 1.0 for all
  of it, the epoch second it resets), as read: Owl checks them.
- Optionally `windows_in(line, now) -> list[Reading]` (see `LiveWindows`):
  the windows one line of the agent's live output reports, so a Run is held
  to the headroom while it runs, not only after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from owl.rules.budget import Reading
from owl.rules.jobrules import Report


@dataclass
class RunContext:
    """Everything a driver may need to start one Run of a Job."""

    job_id: int
    run_id: int
    attempt: int  # the attempt as the person counts it (`owl jobs show`): failed
    # Runs before this one, plus 1; an interrupted Run is none
    job_prompt: str  # what the person typed
    worktree: Path  # the Job's git worktree (cwd of the agent)
    branch: str  # e.g. "owl/job-12"
    base: str  # base commit sha the branch started from
    agent_config: dict = field(default_factory=dict)  # [agents.NAME] from config
    failure_note: str | None = None  # why the previous Run failed, or None
    resume: str | None = None  # a conversation to carry on (claude's session id)
    message: str | None = None  # what the carried-on conversation is told first
    replies: tuple[str, ...] = ()  # the person's replies to the Job, oldest first
    # The branch's own commits (`git log --oneline base..HEAD`), read where
    # the worktree was set up, since the Run starts on a thread that never
    # waits on git; None: read them when the prompt is built.
    commits: str | None = None
    # Runs of the Job before this one, whatever became of them (None: attempt - 1):
    # what earlier Runs left is told whenever there were any.
    earlier: int | None = None


@runtime_checkable
class Driver(Protocol):
    """How to start one kind of agent."""

    name: str
    stream_json: bool  # True when its stdout is claude's stream-json

    def problem(self) -> str | None:
        """One line saying why this agent cannot start here, or None when it can."""
        ...

    def argv(self, ctx: RunContext) -> list[str]:
        """The command line, one element per argument; never run through a shell."""
        ...

    def env(self, ctx: RunContext) -> dict[str, str]:
        """Extra environment variables for the agent (added to the daemon's own)."""
        ...

    def resumes(self) -> bool:
        """Whether a Run can carry the Job's conversation on (RunContext.resume)."""
        ...

    def report(self, lines: list[str], code: int, *, resuming: bool, now: float) -> Report:
        """What the Run's output says happened (a usage limit, the service failing,
        the session id, what it cost); `jobrules` decides what that means."""
        ...


@runtime_checkable
class LiveWindows(Protocol):
    """A driver that reads usage windows from its agent's output as it comes."""

    def windows_in(self, line: str, now: float) -> list[Reading]:
        """The windows this one line reports (none for most lines); never raises."""
        ...


def run_env(ctx: RunContext) -> dict[str, str]:
    """The variables every agent gets, whatever its driver.

    OWL_RUN_ID is also the tag the daemon uses to find a Run's survivors after
    a crash, so it must be on every process the agent starts; the others let
    an agent's own scripts find the handoff without knowing Owl's layout.
    PWD is the worktree, the agent's working directory: the daemon's own
    would be wrong, and OpenCode takes its session's directory from PWD.
    """
    return {
        "PWD": str(ctx.worktree),
        "OWL_JOB_ID": str(ctx.job_id),
        "OWL_RUN_ID": str(ctx.run_id),
        "OWL_ATTEMPT": str(ctx.attempt),
        "OWL_BRANCH": ctx.branch,
        "OWL_WORKTREE": str(ctx.worktree),
        "OWL_HANDOFF": str(Path(ctx.worktree) / ".owl" / "HANDOFF.md"),
    }
