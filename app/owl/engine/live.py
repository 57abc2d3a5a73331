"""What the engine holds for each live Run, and for each Run a full disk kept from its record.

These are the records every run phase reads and writes (start, watch, checks,
end, caps, budgets, the verbs and views), so they sit below all of them: a
phase that needs a Run's fields imports them from here, never from the phase
that happens to create them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

    from owl.agents.base import Driver, RunContext
    from owl.engine import logpipe
    from owl.engine.checks import CheckProcess
    from owl.engine.meter import Meter
    from owl.git import jobstore, outside
    from owl.rules.jobrules import Report
    from owl.tree import KernelCaps, ProcessTree, RunGroup

LOG_CAP = 8 * 1024 * 1024  # a Run's log is rotated at this size, as it is written


@dataclass
class Live:
    """What the engine holds for a live Run besides the core's view of it."""

    run_id: int
    job_id: int
    project: str
    title: str
    popen: subprocess.Popen[bytes]
    tree: ProcessTree
    log_path: Path
    sink: logpipe.Sink  # the agent's output into its log
    log_size: int = 0  # bytes of output seen by the last watch
    exited: bool = False
    pids: list[int] = field(default_factory=list)
    # verification: the checks read from the base branch when the Run started
    worktree: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    checks: tuple[Any, ...] = ()
    check_proc: CheckProcess | None = None  # the check running now
    results: list[Any] = field(default_factory=list)
    waiting: bool = False  # its next check waits, frozen, to begin
    untouchable: list[Any] = field(default_factory=list)  # processes the system kept from us
    not_stopped: list[Any] = field(default_factory=list)  # what its last freeze left running
    outside_before: outside.Snapshot | None = None  # the project's refs, config, hooks at the start
    # the agent: its driver and context, and what its output said (carryon)
    driver: Driver | None = None
    ctx: RunContext | None = None
    resuming: bool = False  # started with --resume: a refusal falls back fresh
    masked: tuple[str, ...] = ()  # the host's sockets its sandbox covers (owl.sandbox.raced)
    kept: tuple[tuple[str, str], ...] = ()  # its own places: (inside, on the host), contain.Wrapped
    raced: str | None = None  # the covered socket gone as its sandbox was set up
    started_again: int = 0  # starts lost that way (owl.sandbox.raced.AGAIN_MOST)
    report: Report | None = None  # the driver's Report, set just before "exited"
    cgroup: RunGroup | None = None  # the Run's own cgroup v2, where one can be made
    exempt: bool = False  # started by `owl start`: not frozen by input
    contained: str | None = None  # how its sandbox was made, as the views say it
    env_dropped: tuple[str, ...] = ()  # names kept out of its environment (never values)
    net_report: Path | None = None  # where its network helper says how that went
    setup_report: Path | None = None  # where it says that bwrap failed at its own start
    setup_failed: str | None = None  # bwrap's words, when its last start failed so
    sandbox: Mapping[str, object] | None = None  # the project's .owl.toml [sandbox]
    meter: Meter | None = None  # the windows its agent reports as it runs (owl.engine.meter)
    # its last freeze: (frozen, thawed) in epoch seconds, thawed None while frozen;
    # a turn the agent loses at the thaw is judged by it (jobrules.judge)
    freeze: tuple[float, float | None] | None = None
    places: jobstore.Places | None = None  # where its git lives, from Owl's records
    # its worktree's git files as its last process left them (checked on that
    # process's waiting thread): changed, no check starts (runchecks)
    git_changed: list[dict[str, Any]] = field(default_factory=list)
    # what it takes of the machine (owl.engine.capwatch)
    caps: KernelCaps | None = None  # its caps as the kernel holds them
    capped: str | None = None  # why it was stopped at a cap
    disk_held: str | None = None  # why the disk floor holds it frozen
    oom_seen: int = 0  # the kernel's OOM kills in it, as last read
    refused_seen: int = 0  # ... and forks refused at its cap
    near: bool = False  # near its memory cap: looked at more often
    memory: int = 0  # bytes its processes held at the last look
    pss_base: tuple[int, int, float] | None = None  # its last PSS sum: (PSS, RSS, when)
    processes: int = 0  # ... and how many they were

    def freeze_now(self) -> None:
        """Stop every process of the Run, noting when (for `freeze`)."""
        self.tree.freeze()
        self.freeze = (time.time(), None)

    def thaw_now(self) -> None:
        """Let the Run's processes go on, noting when; what the freeze left
        running is forgotten."""
        self.tree.thaw()
        self.freeze = (self.freeze[0], time.time()) if self.freeze else None
        self.not_stopped = []


#: A finished Run's record, as `Store.finish_run` takes it: run, outcome, ended by,
#: reason, exit code, when it ended.
RunEnd = tuple[int, str, str, "str | None", "int | None", float]
#: One a full disk held back: the record, the attempt it spent, and what views show of it.
Unrecorded = tuple[RunEnd, "tuple[str, str] | None", dict[str, Any]]
