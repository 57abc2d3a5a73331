"""Carrying a Job on across Runs: the engine's side of `jobrules`.

The rules are pure (`jobrules`); this module does the reading and writing
around them, so the engine calls one function at each point:

- `agent_env`: the environment an agent starts with, without the markers a
  Claude Code session puts in its children (with `CLAUDECODE` set, a claude
  started by Owl from a terminal inside Claude Code refuses to start).
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
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from owl import checks as checksmod
from owl import jobrules
from owl.agents.claude_stream import read_head, read_span, session_in
from owl.agents.handoff import read_handoff
from owl.jobrules import Report, Wait
from owl.store import Store

log = logging.getLogger("owl.engine")

# Set by the Claude Code CLI in the processes it starts (checked with 2.1.332
# by running `env` in its Bash tool), and by IDE integrations.
INSIDE_MARKERS = (
    "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT", "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_CHILD_NOTES_DIR", "CLAUDE_CODE_EXECPATH", "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN", "CLAUDE_CODE_SESSION_ATTENDED", "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_PID", "AI_AGENT",
)
SESSION_POLL = 0.25          # how often the log is looked at for claude's session id
SESSION_LOOK = 60.0          # ... and for how long


def agent_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without the markers of a Claude Code session."""
    return {k: v for k, v in base.items() if k not in INSIDE_MARKERS}


def load_waits(store: Store) -> dict[str, Wait]:
    """Every agent's wait as stored (a restarted daemon keeps them)."""
    return {r["agent"]: Wait(r["agent"], r["kind"], r["until"], r["reason"], r["strikes"])
            for r in store.limits()}


def blocked_agents(waits: Mapping[str, Wait], now: float) -> frozenset[str]:
    return frozenset(a for a, w in waits.items() if jobrules.waiting(w, now))


def watch_agent(popen: Any, log_path: Path, offset: int, driver: Any, resuming: bool,
                on_session: Callable[[str], None],
                settle: Callable[[], Any] | None = None) -> tuple[int, Report]:
    """Wait for the agent to exit; return its exit code and the driver's report.

    Runs on the Run's own waiting thread. `on_session` is called (from this
    thread) once claude's session id shows in the log."""
    code = None
    if getattr(driver, "stream_json", False):
        deadline = time.monotonic() + SESSION_LOOK
        while time.monotonic() < deadline:
            try:
                code = popen.wait(timeout=SESSION_POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            sid = session_in(read_head(log_path, offset))
            if sid:
                on_session(sid)
                break
    if code is None:
        code = popen.wait()
    if settle is not None:
        settle()                  # the output so far reaches the log before it is read
    try:
        report = driver.report(read_span(log_path, offset), code, resuming=resuming,
                               now=time.time())
    except Exception:             # a driver's bug must not lose the Run's end
        log.exception("could not read the Run's output in %s", log_path)
        report = Report()
    return code, report


def plan_for(store: Store, job: Mapping[str, Any], driver: Any,
             worktree: Path) -> tuple[jobrules.Plan, tuple[str, ...]]:
    """How the next Run of `job` begins, and every reply the Job has had."""
    runs = store.runs(job["id"])
    prior = None
    if runs:
        last = runs[-1]
        note = None
        failed = [c for c in store.checks(last["id"]) if c["outcome"] == "failed"]
        if failed:
            note = checksmod.failure_note(failed[-1])
        prior = jobrules.Prior(last["outcome"], last["reason"], last["session_id"], note)
    replies = store.replies(job["id"])
    new = [r["text"] for r in replies if r["run_id"] is None]
    can = bool(driver.resumes())
    handoff = read_handoff(worktree) if can and prior is not None and prior.session_id else None
    return (jobrules.plan(prior, new, can_resume=can, handoff=handoff),
            tuple(r["text"] for r in replies))


def conclude(store: Store, waits: dict[str, Wait], *, run_id: int, agent: str, outcome: str,
             ended_by: str | None, reason: str | None, exit_code: int | None,
             report: Report | None, now: float | None = None) -> jobrules.Verdict:
    """Judge a Run's end, record what its output said, and set or lift the agent's wait."""
    now = time.time() if now is None else now
    have = waits.get(agent)
    verdict = jobrules.judge(agent=agent, outcome=outcome, ended_by=ended_by,
                             exit_code=exit_code, reason=reason, report=report,
                             strikes=have.strikes if have else 0, now=now)
    if report is not None:
        facts: dict[str, Any] = {}
        if report.session_id:
            facts["session_id"] = report.session_id
        if report.usage is not None:
            facts["usage"] = json.dumps(report.usage)
        if report.last_message is not None:
            facts["last_message"] = report.last_message
        if facts:
            store.set_run(run_id, **facts)
    if verdict.wait is not None:
        w = verdict.wait
        store.set_limit(w.agent, w.kind, w.until, w.reason, w.strikes, now=now)
        waits[agent] = w
        log.info("%s waits until %s: %s", agent, time.strftime("%H:%M:%S", time.localtime(w.until)),
                 w.reason)
    elif verdict.clear and have is not None:
        store.clear_limit(agent)
        waits.pop(agent, None)
    return verdict


def limits_view(waits: Mapping[str, Wait], now: float) -> list[dict[str, Any]]:
    """The waits in force, as `owl status --json` gives them."""
    out = []
    for w in sorted(waits.values(), key=lambda w: w.until):
        if jobrules.waiting(w, now):
            out.append({"agent": w.agent, "kind": w.kind,
                        "until": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(w.until)),
                        "until_epoch": round(w.until, 3), "left_s": round(w.until - now, 1),
                        "reason": w.reason})
    return out
