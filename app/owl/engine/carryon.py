"""Carrying a Job on across Runs: the engine's side of `jobrules`.

The rules are pure (`jobrules`); this module does the reading and writing
around them, so the engine calls one function at each point:

- `agent_env`: the environment an agent (and a check) starts with: the
  person's, without the markers a Claude Code session puts in its children
  (with `CLAUDECODE` set, a claude started by Owl from a terminal inside
  Claude Code refuses to start), and without Owl's own virtual environment on
  PATH (a check's `python3` is the person's, not the one Owl runs on).
- `watch_agent`: on the thread that waits for the agent's exit, never on the
  engine thread: the session id as soon as claude prints it (so a Run that
  dies with the daemon can still be resumed), then, after the exit, the
  driver's `Report` from the Run's log.
- `plan_for`: how the next Run begins (resume or fresh, and its message).
- `conclude`: what a Run's end means (an attempt spent or not, a wait for the
  agent), recorded with the Run's session id, usage and final message.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from owl.engine import checks as checksmod
from owl.rules import agentchain, jobrules
from owl.rules import timefmt
from owl.agents.claude_stream import session_in
from owl.logspan import read_head, read_span
from owl.agents.codex_stream import per_run
from owl.agents import setup
from owl.agents.handoff import read_handoff
from owl.rules.jobrules import Report, Wait
from owl.store.db import Store

log = logging.getLogger("owl.engine")

# Set by the Claude Code CLI in the processes it starts (checked with 2.1.332
# by running `env` in its Bash tool), and by IDE integrations.
INSIDE_MARKERS = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SSE_PORT",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CODE_EXECPATH",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_SESSION_ATTENDED",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_PID",
    "AI_AGENT",
)
SESSION_POLL = 0.25  # how often the log is looked at for claude's session id
SESSION_LOOK = 60.0  # ... and for how long


def agent_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without the markers of a Claude Code session, and with Owl's own
    interpreter's `bin` taken off its PATH."""
    env = {k: v for k, v in base.items() if k not in INSIDE_MARKERS}
    if "PATH" in env:
        env["PATH"] = persons_path(env["PATH"], own_bins())
    return env


def own_bins() -> frozenset[str]:
    """The folders of Owl's own interpreter that must not reach an agent's PATH.

    Only a virtual environment's (`sys.prefix` differs from `sys.base_prefix`:
    `.venv`, a pipx venv): Owl run by the system Python has `/usr/bin` there,
    which is the person's too."""
    if sys.prefix == sys.base_prefix:
        return frozenset()
    found = {os.path.join(sys.prefix, "bin"), os.path.join(sys.prefix, "Scripts")}
    return frozenset(os.path.realpath(p) for p in found) | frozenset(found)


def persons_path(path: str, drop: frozenset[str]) -> str:
    """PATH without the folders in `drop` (compared as written and resolved)."""
    kept = [
        p for p in path.split(os.pathsep) if p and p not in drop and os.path.realpath(p) not in drop
    ]
    return os.pathsep.join(kept)


def load_waits(
    store: Store, max_wait: float = jobrules.MAX_WAIT, now: float | None = None
) -> dict[str, Wait]:
    """Every agent's wait as stored (a restarted daemon keeps them), none longer
    than `max_wait` from now: one set before the bound held ("until 2054") ends
    within it, and is stored so."""
    waits = {
        r["agent"]: Wait(r["agent"], r["kind"], r["until"], r["reason"], r["strikes"])
        for r in store.limits()
    }
    bound_waits(store, waits, max_wait, now)
    return waits


def bound_waits(
    store: Store, waits: dict[str, Wait], max_wait: float, now: float | None = None
) -> None:
    """Cut every wait in `waits` to `max_wait` from now (stored too): at start,
    and when an edit of the config lowers limits.max_wait."""
    now = time.time() if now is None else now
    for agent, w in list(waits.items()):
        kept = jobrules.bounded(w, now, max_wait)
        if kept is w:
            continue
        log.warning(
            "%s's wait (until %r) is longer than limits.max_wait; it ends at %s instead",
            agent,
            w.until,
            time.strftime("%Y-%m-%d %H:%M", time.localtime(kept.until)),
        )
        store.set_limit(kept.agent, kept.kind, kept.until, kept.reason, kept.strikes, now=now)
        waits[agent] = kept


def blocked_agents(waits: Mapping[str, Wait], now: float) -> frozenset[str]:
    return frozenset(a for a, w in waits.items() if jobrules.waiting(w, now))


def held_jobs_agents(
    pending: list[str], fallback: list[str], blocked: frozenset[str]
) -> frozenset[str]:
    """The Jobs' `agent` values (of `pending`) whose every agent waits: those Jobs wait."""
    return frozenset(
        a for a in pending if agentchain.choose(agentchain.names(a, fallback), blocked) is None
    )


def next_agent(job_agent: str, fallback: list[str], blocked: frozenset[str]) -> str:
    """The agent the Job's next Run goes to (its first when all of them wait)."""
    chain = agentchain.names(job_agent, fallback)
    return agentchain.choose(chain, blocked) or (chain[0] if chain else job_agent)


def watch_agent(
    popen: Any,
    log_path: Path,
    offset: int,
    driver: Any,
    resuming: bool,
    on_session: Callable[[str], None],
    settle: Callable[[], Any] | None = None,
    kept: Sequence[tuple[str, str]] = (),
) -> tuple[int, Report]:
    """Wait for the agent to exit; return its exit code and the driver's report.

    Runs on the Run's own waiting thread. `on_session` is called (from this
    thread) once claude's session id shows in the log. `kept`: the Run's own
    places, (inside, on the host), passed to a driver that reads its agent's
    files after the Run (`reads_state`): contained, they are Owl's, not the
    person's."""
    code = None
    # A driver that reads its own stream says where its session id is.
    find = getattr(driver, "session_in", None) or session_in
    if getattr(driver, "stream_json", False):
        deadline = time.monotonic() + SESSION_LOOK
        while time.monotonic() < deadline:
            try:
                code = popen.wait(timeout=SESSION_POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            sid = find(read_head(log_path, offset))
            if sid:
                on_session(sid)
                break
    if code is None:
        code = popen.wait()
    if settle is not None:
        settle()  # the output so far reaches the log before it is read
    try:
        lines = read_span(log_path, offset)
        more = {"kept": tuple(kept)} if getattr(driver, "reads_state", False) else {}
        report = setup.read(
            driver.report(lines, code, resuming=resuming, now=time.time(), **more), lines, code
        )
    except Exception:  # a driver's bug must not lose the Run's end
        log.exception("could not read the Run's output in %s", log_path)
        report = Report()
    return code, report


def plan_for(
    store: Store, job: Mapping[str, Any], driver: Any, worktree: Path
) -> tuple[jobrules.Plan, tuple[str, ...]]:
    """How the next Run of `job` begins, and every reply the Job has had."""
    runs = store.runs(job["id"])
    chain = agentchain.names(job.get("agent"))
    name = getattr(driver, "name", None)
    # Only this agent's own Runs carry its conversation; another agent's
    # work since is told, not resumed (a conversation cannot cross agents).
    mine = [r for r in runs if agentchain.run_agent(r.get("agent"), chain) == name]
    prior = None
    if mine:
        last = mine[-1]
        note = None
        failed = [c for c in store.checks(last["id"]) if c["outcome"] == "failed"]
        if failed:
            note = checksmod.failure_note(failed[-1])
        sid = last["session_id"]
        ok = getattr(driver, "session_ok", None)
        if sid and ok is not None and not ok(sid):
            log.warning(
                "job %s: the session id %r its last Run recorded is not one %s "
                "takes; its next Run starts fresh",
                job["id"],
                sid[:80],
                getattr(driver, "name", "the agent"),
            )
            sid = None
        others = sorted(
            {
                agentchain.run_agent(r.get("agent"), chain) or "another agent"
                for r in runs
                if r["id"] > last["id"]
            }
        )
        prior = jobrules.Prior(
            last["outcome"], last["reason"], sid, note, carried_by=" and ".join(others) or None
        )
    replies = store.replies(job["id"])
    new = [r["text"] for r in replies if r["run_id"] is None]
    can = bool(driver.resumes())
    handoff = read_handoff(worktree) if can and prior is not None and prior.session_id else None
    return (
        jobrules.plan(prior, new, can_resume=can, handoff=handoff),
        tuple(r["text"] for r in replies),
    )


def conclude(
    store: Store,
    waits: dict[str, Wait],
    *,
    run_id: int,
    agent: str,
    outcome: str,
    ended_by: str | None,
    reason: str | None,
    exit_code: int | None,
    report: Report | None,
    now: float | None = None,
    max_wait: float = jobrules.MAX_WAIT,
    freeze: tuple[float, float | None] | None = None,
) -> jobrules.Verdict:
    """Judge a Run's end, record what its output said, and set or lift the agent's wait.
    `freeze`: the Run's last freeze, (frozen, thawed) in epoch seconds."""
    now = time.time() if now is None else now
    have = waits.get(agent)
    verdict = jobrules.judge(
        agent=agent,
        outcome=outcome,
        ended_by=ended_by,
        exit_code=exit_code,
        reason=reason,
        report=report,
        strikes=have.strikes if have else 0,
        now=now,
        max_wait=max_wait,
        freeze=freeze,
    )
    if verdict.thaw_lost:
        log.info("run %s: %s", run_id, verdict.reason)
    if report is not None:
        _log_odd(run_id, agent, report, now, max_wait)
        facts: dict[str, Any] = {}
        if report.session_id:
            facts["session_id"] = report.session_id
        if report.usage is not None:
            facts["usage"] = json.dumps(_own_usage(store, run_id, report))
        if report.last_message is not None:
            facts["last_message"] = report.last_message
        if facts:
            store.set_run(run_id, **facts)
    if verdict.wait is not None:
        w = verdict.wait
        store.set_limit(w.agent, w.kind, w.until, w.reason, w.strikes, now=now)
        waits[agent] = w
        log.info(
            "%s waits until %s: %s",
            agent,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(w.until)),
            w.reason,
        )
    elif verdict.clear and have is not None:
        store.clear_limit(agent)
        waits.pop(agent, None)
    return verdict


def _own_usage(store: Store, run_id: int, report: Report) -> dict[str, Any]:
    """The Run's own usage: an agent that counts over its whole conversation
    (Codex's thread, `usage["thread"]`) less what the same conversation's
    previous Run had counted."""
    usage = dict(report.usage or {})
    if not isinstance(usage.get("thread"), dict) or not report.session_id:
        return usage
    run = store.run(run_id)
    earlier = (
        [
            r
            for r in store.runs(run["job_id"])
            if r["id"] < run_id and r["session_id"] == report.session_id and r["usage"]
        ]
        if run
        else []
    )
    return per_run(usage, earlier[-1]["usage"] if earlier else None)


def _log_odd(run_id: int, agent: str, report: Report, now: float, max_wait: float) -> None:
    """Say in the log what the Run's output gave that Owl did not obey: a reset
    moment it could not use, session ids not taken."""
    if (
        report.limit
        and (report.reset_said or report.resets_at is not None)
        and not jobrules.usable_reset(report.resets_at, now, max_wait)
    ):
        log.warning(
            "run %s: %s's reset moment is not used (%s); the backoff applies",
            run_id,
            agent,
            jobrules.unusable_words(report, now, max_wait),
        )
    for sid in report.sessions_ignored:
        log.warning(
            "run %s: %s announced the session id %r, which is not taken (the Run's session is %r)",
            run_id,
            agent,
            sid,
            report.session_id,
        )


def limits_view(waits: Mapping[str, Wait], now: float) -> list[dict[str, Any]]:
    """The waits in force, as `owl status --json` gives them."""
    out = []
    for w in sorted(waits.values(), key=lambda w: w.until):
        if jobrules.waiting(w, now):
            out.append(
                {
                    "agent": w.agent,
                    "kind": w.kind,
                    "until": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(w.until)),
                    "until_epoch": round(w.until, 3),
                    "left_s": round(w.until - now, 1),
                    "until_text": timefmt.ahead(w.until, now),
                    "reason": w.reason,
                }
            )
    return out
