"""A Run's start: its agent spawned under a reaper of its own, its log, its waiting thread.

Kept apart from the engine's loop because it is the one place that knows how an
agent is put into the world (its context, env, cgroup, and the fresh start when
a resumed conversation is refused); the engine only decides when. Every
function here runs on the engine thread and takes the engine as `eng`; nothing
here runs git (the worktree is already set up by owl.git.setup), so nothing waits.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from owl.engine.state import State

from owl import tree
from owl.agents import argfit
from owl.logspan import read_head
from owl.engine import capwatch, carryon, containing, sandboxwait
from owl.engine.live import LOG_CAP, Live
from owl.engine import logpipe
from owl.engine.meter import Meter
from owl.git import jobstore, outsidekeep, storing, workspace
from owl.engine import checks as checksmod
from owl.git import setup as setupmod
from owl.rules.lifecycle import Phase
from owl.store.db import title_of
from owl.rules import capwords, jobrules, jobtable
from owl.sandbox import raced

log = logging.getLogger("owl.engine")


def launch(eng: State, job: dict[str, Any], ready: setupmod.Ready) -> int | None:
    """Start the agent of a Job whose worktree is ready (fast: no git)."""
    from owl import agents

    job_id, ws, settings, driver = job["id"], ready.ws, ready.settings, ready.driver
    exempt = ready.exempt
    project = Path(job["project"])
    if sandboxwait.hold(eng, job_id, driver.name, settings.sandbox):
        return None  # it waits for a sandbox, as it is: no Run, nothing spent
    before = ready.outside_before  # taken by the setup, off this thread
    plan, replies = carryon.plan_for(eng.store, job, driver, ws.worktree)
    run_id = eng.store.start_run(job_id)
    outsidekeep.keep(eng.paths.logs, run_id, project, before)  # on its own thread
    eng.store.give_replies(job_id, run_id)
    eng.store.set_run(run_id, resumed=int(plan.resume is not None) if driver.stream_json else None)
    log_path = eng.paths.logs / f"{run_id}.log"
    eng.store.set_run(run_id, log=str(log_path), agent=driver.name)
    # One count everywhere: the attempt `owl jobs show`, the log's header and the
    # tray give this Run (interrupted Runs spend none), told to the agent too.
    earlier = [r for r in eng.store.runs(job_id) if r["id"] != run_id]
    attempt = 1 + sum(1 for r in earlier if r["outcome"] == "failed")
    ctx = agents.RunContext(
        job_id=job_id,
        run_id=run_id,
        attempt=attempt,
        job_prompt=job["prompt"],
        worktree=ws.worktree,
        branch=ws.branch,
        base=ws.base,
        agent_config=eng.cfg.agent(driver.name),
        failure_note=failure_note(eng, job_id, run_id),
        resume=plan.resume,
        message=plan.message,
        replies=replies,
        commits=ready.commits,
        earlier=len(earlier),
    )
    env = carryon.agent_env(os.environ)
    env.update(driver.env(ctx))
    env.update({"OWL_JOB_ID": str(job_id), "OWL_RUN_ID": str(run_id), "OWL_INSTANCE": eng.instance})
    net_report = eng.paths.logs / f"{run_id}.net"
    setup_report = fresh_report(eng.paths.logs / f"{run_id}.setup")
    try:
        wrapped = containing.wrap(
            eng.cfg,
            eng.paths,
            driver.name,
            argfit.bounded(driver.argv(ctx), env),
            env,
            ws.worktree,
            project,
            settings.sandbox,
            ready.places,
            net_report,
            setup_report,
        )
    except containing.Refusal as e:
        # found out only now (no answer was at hand before): the Job waits, as above
        outsidekeep.forget(eng.paths.logs, run_id)
        eng.store.finish_run(run_id, "interrupted", None, str(e), None)
        eng.store.apply(job_id, jobtable.Event.INTERRUPTED)
        sandboxwait.learned(eng, e.problem)
        sandboxwait.hold(eng, job_id, driver.name, settings.sandbox)
        return None
    eng.store.set_run(run_id, contained=wrapped.label)
    meter = meter_for(driver)
    sink = logpipe.Sink(log_path, LOG_CAP, tap=meter.feed if meter is not None else None)
    if not wrapped.contained:  # said in the Run's own log too, before the agent speaks
        os.write(sink.fd, f"owl: {wrapped.label}\n".encode())
    cg = tree.RunGroup.make(eng.instance, str(run_id))
    kc = capwatch.kernel_caps(eng, cg, run_id)
    try:
        popen = tree.spawn(
            wrapped.argv,
            cwd=str(ws.worktree),
            env=wrapped.env,
            stdout=sink.fd,
            stderr=sink.fd,
            nice=eng.cfg.nice,
            reaper=True,
            cgroup=cg,
            also=kc.joins,
        )
    except OSError as e:
        sink.close()
        outsidekeep.forget(eng.paths.logs, run_id)
        kc.remove()
        if cg is not None:
            cg.remove()
        # a setup problem (its program is not there): blocked once, no attempt spent
        why = (
            f"the agent could not be started: {e}; "
            f"{jobrules.setup_hint(driver.name, 'its program was not found')}"
        )
        eng.store.finish_run(run_id, "interrupted", None, why, None)
        eng.store.apply(job_id, jobtable.Event.BROKEN, reason=why)
        return None
    sink.started()
    pt = tree.ProcessTree(("OWL_RUN_ID", str(run_id)), popen.pid, cgroup=cg, nice=eng.cfg.nice)
    lv = Live(
        run_id=run_id,
        job_id=job_id,
        project=str(project),
        title=title_of(job["prompt"]),
        popen=popen,
        tree=pt,
        log_path=log_path,
        sink=sink,
        worktree=ws.worktree,
        env=env,
        checks=settings.checks,
        outside_before=before,
        driver=driver,
        ctx=ctx,
        resuming=plan.resume is not None,
        cgroup=cg,
        caps=kc,
        exempt=exempt,
        contained=wrapped.label,
        env_dropped=wrapped.dropped,
        masked=wrapped.masked,
        kept=wrapped.kept,
        net_report=net_report if containing.helped(wrapped.label) else None,
        setup_report=setup_report if wrapped.contained else None,
        sandbox=settings.sandbox,
        meter=meter,
        places=ready.places,
    )
    eng.live[run_id] = lv
    threading.Thread(
        target=wait_agent, args=(eng, lv, popen, 0), daemon=True, name=f"owl-run-{run_id}"
    ).start()
    eng.store.set_run(run_id, pids=pt.identities())
    log.info("run %s of job %s started (pid %s)", run_id, job_id, popen.pid)
    eng.do(
        eng.core.started(
            run_id,
            eng.clock(),
            exempt=exempt,
            checks=[(c.name, c.timeout) for c in settings.checks],
        )
    )
    return run_id


def fresh_report(path: Path) -> Path:
    """``path``, with no report of an earlier start left in it."""
    try:
        path.unlink()
    except OSError:
        pass
    return path


def meter_for(driver: Any) -> Meter | None:
    """A live meter for a driver that reads windows from its agent's output."""
    from owl.agents.base import LiveWindows

    return Meter(driver.windows_in) if isinstance(driver, LiveWindows) else None


def note_network(eng: State, lv: Live) -> None:
    """Once the Run's network helper has said how its network came out: the
    Run's label says so where it has none (pasta failed), not "own network"."""
    if lv.net_report is None or lv.contained is None:
        return
    label, spoke = containing.network_said(lv.contained, lv.net_report)
    if not spoke:
        return
    try:
        lv.net_report.unlink()
    except OSError:
        pass
    lv.net_report = None
    if label != lv.contained:
        lv.contained = label
        eng.note(lv.run_id, contained=label)
        log.warning("run %s: %s", lv.run_id, label)


def failure_note(eng: State, job_id: int, run_id: int) -> str | None:
    runs = [r for r in eng.store.runs(job_id) if r["id"] != run_id]
    if runs and runs[-1]["outcome"] == "interrupted" and capwords.is_cap_stop(runs[-1]["reason"]):
        # told even to a fresh start: a second stop in a row blocks the Job
        return (
            f"The previous Run was {runs[-1]['reason']}. Owl stops a Run that passes "
            "that cap; do the work within it."
        )
    if runs and runs[-1]["outcome"] == "failed" and runs[-1]["reason"]:
        note = f"The previous Run failed: {runs[-1]['reason']}"
        failed = [c for c in eng.store.checks(runs[-1]["id"]) if c["outcome"] == "failed"]
        if failed:
            note += "\n\n" + checksmod.failure_note(failed[-1])
        return note
    return None


def wait_agent(eng: State, lv: Live, popen: Any, offset: int) -> None:
    """The agent's own waiting thread: its exit, and what its output said."""

    def session(sid: str) -> None:
        eng.post(lambda: eng.note(lv.run_id, session_id=sid))

    sink = lv.sink
    code, lv.report = carryon.watch_agent(
        popen,
        lv.log_path,
        offset,
        lv.driver,
        lv.resuming,
        session,
        settle=sink.settle,
        kept=lv.kept,
    )
    lv.setup_failed = lv.raced = None
    if code != 0 and lv.setup_report is not None:
        # bwrap's own start failed, by its own account (not by words the agent
        # could print): a covered socket gone meanwhile, or else Owl's failure
        head = read_head(lv.log_path, offset)
        lv.setup_failed = containing.setup_failed(lv.setup_report, head, code)
        if lv.setup_failed is not None and lv.masked:
            lv.raced = raced.raced(head, lv.masked)
    note_git_files(lv, land=True)
    eng.agent_exited(lv.run_id, code, popen)


def note_git_files(lv: Live, land: bool = False) -> None:
    """Off the engine thread, as a process of the Run exits: whether the
    worktree's git files still say what Owl wrote (a check does not start
    otherwise; the Run's end puts them back and blocks the Job), and, as the
    agent exits, its branch brought into the project: by the time its Job is
    in review the branch there is what the agent committed (the Run's end
    brings in what its checks may have added)."""
    if lv.places is None:
        return
    try:
        lv.git_changed = jobstore.verify(lv.places)
        branch = lv.ctx.branch if lv.ctx is not None else None
        if land and branch and not workspace.project_problem(Path(lv.project)):
            storing.land(Path(lv.project), lv.places, branch)
    except Exception as e:  # noqa: BLE001 - the Run's end checks and brings in again
        log.warning("run %s: its git could not be read as it ended: %s", lv.run_id, e)


def start_again(eng: State, lv: Live) -> bool:
    """Start the same Run's agent again, at once, when its last start was lost
    for no fault of its own: a resume the CLI refused (afresh, with the
    handoff), or a sandbox whose set-up lost a race with the host
    (`owl.sandbox.raced`; as it was, at most `AGAIN_MOST` times).

    No attempt is spent and the core never hears of the lost process.
    Only while the Run is running (frozen or ending, it ends as it is)."""
    r = eng.core.runs.get(lv.run_id)
    if r is None or r.phase is not Phase.RUNNING or lv.check_proc is not None:
        return False
    report = lv.report
    if lv.resuming and report is not None and report.resume_failed:
        assert lv.ctx is not None  # set by launch, with the agent
        lv.resuming = False
        lv.ctx = dataclasses.replace(lv.ctx, resume=None, message=None)
        said = (
            f"the conversation could not be resumed ({report.resume_failed}); "
            "starting afresh with the handoff"
        )
    elif lv.raced is not None and lv.started_again < raced.AGAIN_MOST:
        lv.started_again += 1
        said = raced.again_words(lv.raced)
    else:
        return False
    lv.report, lv.raced = None, None
    if not _spawn_again(eng, lv, said):
        return False
    log.info("run %s: %s (pid %s)", lv.run_id, said, lv.popen.pid)
    return True


def _spawn_again(eng: State, lv: Live, said: str) -> bool:
    """The agent started anew in the Run's sandbox, tree and log, `said` written first."""
    assert lv.driver is not None and lv.ctx is not None  # set by launch, with the agent
    lv.sink.settle()
    offset = lv.log_path.stat().st_size if lv.log_path.exists() else 0
    tap = lv.meter.feed if lv.meter is not None else None
    old, lv.sink = lv.sink, logpipe.Sink(lv.log_path, LOG_CAP, tap=tap)  # appends to the same log
    old.close()
    os.write(lv.sink.fd, f"owl: {said}\n".encode())
    lv.tree.kill()  # anything the lost process left (before the
    if lv.setup_report is not None:  # fresh one starts: the sweep finds the Run's tag)
        fresh_report(lv.setup_report)
    try:
        wrapped = containing.wrap(
            eng.cfg,
            eng.paths,
            lv.driver.name,
            argfit.bounded(lv.driver.argv(lv.ctx), lv.env),
            lv.env,
            Path(lv.worktree or lv.project),
            Path(lv.project),
            lv.sandbox,
            lv.places,
            lv.net_report,
            lv.setup_report,
        )
        popen = tree.spawn(
            wrapped.argv,
            cwd=str(lv.worktree),
            env=wrapped.env,
            stdout=lv.sink.fd,
            stderr=lv.sink.fd,
            nice=eng.cfg.nice,
            reaper=True,
            cgroup=lv.cgroup,
            also=lv.caps.joins if lv.caps is not None else (),
        )
    except (OSError, containing.Refusal) as e:
        log.warning("run %s: could not start again: %s", lv.run_id, e)
        return False
    lv.sink.started()
    lv.masked, lv.kept = wrapped.masked, wrapped.kept
    lv.popen, lv.tree = (
        popen,
        tree.ProcessTree(
            ("OWL_RUN_ID", str(lv.run_id)), popen.pid, cgroup=lv.cgroup, nice=eng.cfg.nice
        ),
    )
    fresh = {} if lv.resuming else {"resumed": 0, "session_id": None}
    eng.note(lv.run_id, pids=lv.tree.identities(), **fresh)
    threading.Thread(
        target=wait_agent,
        args=(eng, lv, popen, offset),
        daemon=True,
        name=f"owl-run-{lv.run_id}-again",
    ).start()
    return True


def wait_proc(
    eng: State,
    run_id: int,
    popen: Any,
    settle: Callable[[], Any] | None = None,
    lv: Live | None = None,
) -> None:
    code = popen.wait()
    if settle is not None:
        settle()  # its output reaches the log before its result is read
    if lv is not None:
        note_git_files(lv)
    eng.agent_exited(run_id, code, popen)
