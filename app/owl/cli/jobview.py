"""`owl jobs show`: one Job, every Run, its checks, in words; and the one-line
label of a Run that `owl logs` also opens with, so both say the same."""

from __future__ import annotations

import time

from owl import textsafe
from owl.cli.carry import job_lines, run_line
from owl.rules.timefmt import duration, moment, parse_iso
from owl.rules.lifecycle import shown_run_outcome

SAID_LINES = 20  # the agent's last message in `jobs show`; the page has it whole


def run_outcome(r: dict) -> str:
    """What became of a Run, in words: "failed: check unit tests failed (exit 1)"."""
    outcome = shown_run_outcome(r)
    if r.get("ended_by") == "sigterm" and outcome == "interrupted":
        outcome = "interrupted (ended when asked)"
    why = r.get("reason")
    if why:
        return f"{outcome}: {why}"
    if outcome == "failed" and r.get("exit_code") is not None:
        return f"failed: exit {r['exit_code']}"
    return outcome


def run_label(job_id: int, r: dict) -> str:
    """`job 7 · run 6 · attempt 2 · failed: check unit tests failed (exit 1)`."""
    attempt = f"attempt {r['attempt']}" if r.get("attempt") is not None else "no attempt spent"
    return f"job {job_id} · run {r['id']} · {attempt} · {run_outcome(r)}"


def log_command(job_id: int, r: dict, latest: bool) -> str:
    return f"owl logs {job_id}" if latest else f"owl logs {job_id} --run {r['id']}"


def _took(r: dict, now: float) -> str:
    start, end = parse_iso(r.get("started_at")), parse_iso(r.get("ended_at"))
    if start is None:
        return ""
    if end is None:
        return f"started {moment(start, now)}, {duration(now - start)} so far"
    took = r.get("duration_s")  # unrounded, as the review page has it
    return f"started {moment(start, now)}, took {duration(end - start if took is None else took)}"


def show_job(job: dict, now: float | None = None) -> None:
    now = time.time() if now is None else now
    print(
        f"job {job['id']} · {job['state']}"
        + (f" · position {job['position']}" if job.get("position") else "")
    )
    print(f"  prompt:   {job['title']}")
    print(f"  project:  {job['project']}   agent: {job['agent']}")
    created = parse_iso(job.get("created_at"))
    if created is not None:
        print(f"  queued:   {moment(created, now)}")
    if job.get("branch"):
        print(
            f"  branch:   {job['branch']}"
            + (f"   worktree: {job['worktree']}" if job.get("worktree") else "")
        )
    print(
        f"  attempts: {job['attempts_left']} of {job['attempts']} left "
        "(a Run you interrupted costs none)"
    )
    if job.get("reason"):
        print(f"  why:      {job['reason']}")
    for c in job.get("commits") or []:
        print(f"  commit    {c}")
    if job.get("diffstat"):
        print(f"  changes:  {job['diffstat']}")
    for f in job.get("files") or []:
        counts = f.get("note") or (
            "binary" if f["added"] is None else f"+{f['added']} -{f['removed']}"
        )
        print(f"    {counts:>12}  {f['path']}")
    if job.get("last_message"):
        from owl.review.text import visible

        lines = visible(job["last_message"].strip()).split("\n")
        if len(lines) > SAID_LINES:
            lines = lines[:SAID_LINES] + [f"… (owl jobs review {job['id']} shows all of it)"]
        print("  agent:    " + "\n            ".join(lines))
    for line in job_lines(job):
        print(line)
    runs = job.get("runs") or []
    if not runs:
        print("  no runs yet")
    for n, r in enumerate(runs):
        attempt = f"attempt {r['attempt']}" if r.get("attempt") is not None else "no attempt"
        print(f"  run {r['id']} · {attempt} · {run_outcome(r)}")
        took = _took(r, now)
        by = f"by {r['agent']} · " if r.get("agent") else ""
        print(
            f"      {by}{took + ' · ' if took else ''}log: "
            f"{log_command(job['id'], r, n == len(runs) - 1)}"
        )
        extra = run_line(r)
        if extra:
            print(extra)
        if r.get("contained"):
            print(f"      {textsafe.line(r['contained'])}")
        if r.get("checks"):
            print("      " + gated_by(r["checks"], job.get("base")))
        for c in r.get("checks") or []:
            print("      " + check_line(c, job["id"], r["id"]))
        for line in r.get("outside_text") or []:
            print(f"      outside its branch, the agent {line}")
    if job.get("verification"):
        print(f"  verified: {job['verification']}")
    again = job.get("verify")
    if again:
        ended = parse_iso(again.get("ended_at"))
        print(
            f"  checks run again {moment(ended, now) if ended else '?'}: "
            + ("all passed" if again["passed"] else "not all passed")
            + f" · {gated_by(again['checks'], job.get('base'))}"
        )
        for c in again["checks"]:
            print("      " + check_line(c))


def gated_by(checks: list[dict], base: str | None) -> str:
    """Which .owl.toml declared these checks: "checks of .owl.toml at a1b2c3d
    (the commit the Job started from)"."""
    source = next((c.get("source") for c in checks if c.get("source")), None)
    if not source:
        return "checks of .owl.toml on the base branch"
    why = " (the commit the Job started from)" if base and source == base else ""
    return f"checks of .owl.toml at {source[:7]}{why}"


def check_line(c: dict, job_id: int | None = None, run_id: int | None = None) -> str:
    """One check of a Run: pass/fail, name, exit code, duration, command, its log."""
    mark = {"passed": "pass", "failed": "FAIL"}.get(c.get("outcome") or "", c.get("outcome"))
    code = f"exit {c['exit_code']}" if c.get("exit_code") is not None else "no exit code"
    took = duration(c["duration_s"]) if c.get("duration_s") is not None else "?"
    line = f"check {mark}  {c['name']}  ({code}, {took})  $ {c['run']}"
    if c.get("python3") is not None:
        line += f"  · python3: {c['python3'] or 'none on PATH'}"
    if job_id is not None and run_id is not None:
        import shlex

        line += f"  · log: owl logs {job_id} --run {run_id} --check {shlex.quote(c['name'])}"
    return line
