"""The watch over what each live Run takes of the machine: memory, processes, free disk.

The caps are `owl.rules.runcaps`'; this module measures and acts on the
engine thread (takes the engine as `eng`):

- at a Run's start (`kernel_caps`), the caps are written where the kernel can
  hold them (`tree.KernelCaps`: cgroup v2, or v1 as root), so a Run is
  refused the page or the fork at the cap itself;
- on every pass of the watch (`watch`), whatever the kernel holds, Owl's own
  figures: the processes the sweep just found, counted, and their memory
  summed (RSS, and PSS once RSS passes the cap: see `tree.usage`), and the
  kernel's own word (an OOM kill in the Run, a fork refused) — a Run over a
  cap is stopped through the lifecycle (`Core.over`: frozen, then ended);
- `exited`: the agent's exit is read against the kernel's count of OOM kills
  first, so a process the kernel ended at the cap is the cap's doing, not
  "the agent exited with code 137";
- `floor`: the free space on Owl's home and on each worktree's filesystem,
  as the disk watch last saw it (`owl.engine.diskwatch`: ten looks a second,
  off this thread, an event when one crosses the floor); under
  `runs.disk_floor` the Runs there are frozen and held (`Core.floor`),
  and go on when there is room (`Core.room`); no Run starts meanwhile
  (`start_gate`);
- `judged` / `block_reason`: a Run stopped at a cap spends no attempt; a
  second in a row blocks its Job.

The per-pass cost is one small read per process (statm): bench/caps_sweep.py
measures it for a Run of 100 processes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine.state import State
    from owl.engine.live import Live

from owl import tree
from owl.engine import diskwatch, telling
from owl.rules import capwords, lifecycle, runcaps
from owl.rules.lifecycle import Phase

log = logging.getLogger("owl.engine")

NEAR_LOOK = 0.2  # seconds between looks while a Run is near its memory cap
KERNEL_MARGIN = 8  # where the kernel holds runs.memory, the watch acts an eighth past it
PSS_AGAIN = 30.0  # a PSS sum is read again at least this often while RSS is past the cap

_RAM: list[int] = []


def ram() -> int:
    """The machine's RAM (read once: it does not change under a running daemon)."""
    if not _RAM:
        _RAM.append(tree.total_memory())
    return _RAM[0]


def memory_cap(eng: State) -> int | None:
    return eng.cfg.run_memory.of(ram())


def processes_cap(eng: State) -> int | None:
    return eng.cfg.run_processes or None


def kernel_caps(eng: State, group: tree.RunGroup | None, run_id: int) -> tree.KernelCaps:
    """The Run's caps written where the kernel holds them (before its agent starts)."""
    caps = tree.KernelCaps.make(
        group, eng.instance, str(run_id), memory_cap(eng), processes_cap(eng)
    )
    if caps.where:
        log.info(
            "run %s: the kernel holds its caps (%s): memory %s, processes %s",
            run_id,
            caps.where,
            runcaps.shown(caps.memory) if caps.memory else "Owl's watch",
            caps.processes or "Owl's watch",
        )
    return caps


# ------------------------------------------------------------ memory, processes


def watch(eng: State, lv: Live, now: float) -> None:
    """One look at a running Run: over a cap, it is stopped."""
    r = eng.core.runs.get(lv.run_id)
    if r is None or r.phase is not Phase.RUNNING or lv.capped:
        return
    reason = kernel_said(eng, lv) or counted(eng, lv, now)
    if reason is not None:
        stop(eng, lv, reason, now)


def counted(eng: State, lv: Live, now: float) -> str | None:
    """Owl's own figures for the Run, from the processes its last sweep found.

    RSS first (cheap; never less than what the Run holds). Past the cap, PSS
    (costly: bench/caps_sweep.py measured 100 Python processes at 15 times
    less PSS than RSS, read in 15 times the time). Once read, PSS is carried
    forward by what RSS gained since (new pages count in RSS at least as
    much as in PSS), and read again only when that estimate passes the cap,
    or every PSS_AGAIN seconds: a Run of many processes sharing their pages,
    well under its cap, does not pay the walk on every pass."""
    pids = lv.tree.members()
    lv.processes = len(pids)
    cap = processes_cap(eng)
    if cap is not None:
        over = runcaps.processes_over(len(pids), cap)
        if over is not None:
            return over
    mcap = memory_cap(eng)
    if mcap is not None and lv.caps is not None and lv.caps.memory is not None:
        # The kernel holds the cap itself, to the byte, by what it charges the
        # Run; Owl's figures also count pages charged elsewhere (a library
        # another process read first). The watch backs the kernel up, a little
        # past its wall, rather than race its OOM kill, which names the cap.
        mcap += mcap // KERNEL_MARGIN
    lv.memory = tree.resident(pids, swap=tree.swapping())
    if mcap is None:
        lv.near = False
        return None
    rss, lv.near = lv.memory, runcaps.near(lv.memory, mcap)
    if rss <= mcap:  # RSS is never less than what the Run holds
        lv.pss_base = None
        return None
    base = lv.pss_base
    if base is not None and now - base[2] < PSS_AGAIN:
        estimate = base[0] + max(0, rss - base[1])
        if estimate <= mcap:
            lv.memory, lv.near = estimate, runcaps.near(estimate, mcap)
            return None
    lv.memory = tree.proportional(pids)
    lv.pss_base = (lv.memory, rss, now)
    lv.near = runcaps.near(lv.memory, mcap)
    return runcaps.memory_over(lv.memory, mcap, eng.cfg.run_memory.text)


def kernel_said(eng: State, lv: Live) -> str | None:
    """What the kernel did at the Run's caps since the last look: an OOM kill
    in the Run, a fork refused."""
    caps = lv.caps
    if caps is None:
        return None
    kills = caps.oom_kills()
    if kills > lv.oom_seen and caps.memory is not None:
        lv.oom_seen = kills
        return runcaps.memory_killed(caps.memory, eng.cfg.run_memory.text)
    refused = caps.forks_refused()
    if refused > lv.refused_seen and caps.processes is not None:
        lv.refused_seen = refused
        return runcaps.forks_refused(caps.processes)
    return None


def exited(eng: State, lv: Live) -> None:
    """The agent (or its check) exited: if the kernel ended a process of the
    Run at its cap meanwhile, the Run is stopped for the cap first."""
    r = eng.core.runs.get(lv.run_id)
    if r is None or r.phase is Phase.ENDING or lv.capped:
        return
    reason = kernel_said(eng, lv)
    if reason is not None:
        stop(eng, lv, reason, eng.clock())


def stop(eng: State, lv: Live, reason: str, now: float) -> None:
    lv.capped = reason
    log.warning("run %s of job %s %s", lv.run_id, lv.job_id, reason)
    telling.cap_stop(eng, lv, reason)
    eng.do(eng.core.over(lv.run_id, now, reason))


def wake_at(eng: State, now: float) -> list[float]:
    """A Run near its memory cap is looked at more often than once a second."""
    return [now + NEAR_LOOK] if any(lv.near for lv in eng.live.values()) else []


# ------------------------------------------------------------------- disk


def floor(eng: State, now: float) -> None:
    """Hold every Run whose worktree's (or Owl's home's) disk is under the
    floor; let one go on whose disk has room again. The free space is the
    disk watch's last look (`owl.engine.diskwatch`, ten a second, off this
    thread); the folders it looks at are set here, on every pass."""
    home_dir = str(eng.paths.db.parent)
    worktrees = {lv.run_id: str(lv.worktree) for lv in eng.live.values() if lv.worktree}
    eng.disk.watch([home_dir, *worktrees.values()] if eng.live else [], eng.cfg.disk_floor)
    home = eng.disk.low(home_dir)
    for lv in list(eng.live.values()):
        r = eng.core.runs.get(lv.run_id)
        if r is None or r.phase is Phase.ENDING:
            continue
        worktree = worktrees.get(lv.run_id)
        low = home or (eng.disk.low(worktree) if worktree else None)
        if low is not None and lv.disk_held is None:
            lv.disk_held = low
            log.warning("run %s of job %s held: %s", lv.run_id, lv.job_id, low)
            telling.cap_stop(eng, lv, low)
            eng.do(eng.core.floor(lv.run_id, now, low))
        elif low is not None and r.frozen_by not in (lifecycle.DISK, lifecycle.USER):
            eng.do(eng.core.floor(lv.run_id, now, low))  # thawed meanwhile (a resume)
        elif low is None and lv.disk_held is not None:
            lv.disk_held = None
            log.info("run %s: the disk has room again", lv.run_id)
            eng.do(eng.core.room(lv.run_id, now))


def start_gate(eng: State) -> str | None:
    """Why no Run starts now for want of disk (Owl's home under the floor), or None."""
    if eng.cfg.disk_floor.off:
        return None
    low = diskwatch.under(str(eng.paths.db.parent), eng.cfg.disk_floor)
    if low is None:
        return None
    return f"{low.removeprefix(capwords.STOPPED)}: no Run starts until there is room"


# ------------------------------------------------------------------ the end


def judged(lv: Live, outcome: str, reason: str | None) -> tuple[str, str | None]:
    """A Run stopped at a cap is interrupted, with the cap's reason, whatever
    its agent said as it was ended (no attempt spent)."""
    if lv.capped and outcome == "failed":
        return "interrupted", lv.capped
    return outcome, reason


def block_reason(eng: State, lv: Live, outcome: str, reason: str | None) -> str | None:
    """The Job's reason to be blocked when this Run and the one before it were
    both stopped at a cap; None otherwise."""
    if outcome != "interrupted" or not capwords.is_cap_stop(reason):
        return None
    earlier = [r for r in eng.store.runs(lv.job_id) if r["id"] < lv.run_id]
    if not earlier or not capwords.is_cap_stop(earlier[-1].get("reason")):
        return None
    return runcaps.block_words(str(reason), lv.job_id)
