"""`owl jobs show`: one Job, every Run, its checks, in words."""

from __future__ import annotations

from owl.cli.carry import job_lines, run_line


def show_job(job: dict) -> None:
    print(f"job {job['id']} · {job['state']}"
          + (f" · position {job['position']}" if job.get("position") else ""))
    print(f"  prompt:   {job['title']}")
    print(f"  project:  {job['project']}   agent: {job['agent']}")
    if job.get("branch"):
        print(f"  branch:   {job['branch']}" + (f"   worktree: {job['worktree']}"
                                                 if job.get("worktree") else ""))
    print(f"  attempts: {job['attempts_left']} of {job['attempts']} left")
    if job.get("reason"):
        print(f"  why:      {job['reason']}")
    for c in job.get("commits") or []:
        print(f"  commit    {c}")
    if job.get("diffstat"):
        print(f"  changes:  {job['diffstat']}")
    for f in job.get("files") or []:
        counts = "binary" if f["added"] is None else f"+{f['added']} -{f['removed']}"
        print(f"    {counts:>12}  {f['path']}")
    if job.get("last_message"):
        from owl.review.text import visible

        said = visible(job["last_message"].strip()).replace("\n", "\n            ")
        print(f"  agent:    {said}")
    for line in job_lines(job):
        print(line)
    if not job["runs"]:
        print("  no runs yet")
    for r in job["runs"]:
        outcome = r["outcome"] or r["state"]
        if r["ended_by"] == "sigkill" and outcome == "interrupted":
            outcome = "killed"
        how = f" ({r['ended_by']})" if r["ended_by"] and r["ended_by"] != "exit" else ""
        code = f" exit {r['exit_code']}" if r["exit_code"] is not None else ""
        why = f" — {r['reason']}" if r["reason"] else ""
        print(f"  run {r['id']} attempt {r['attempt']}: {outcome}{how}{code}{why}  "
              f"[{r['started_at']} → {r['ended_at'] or 'now'}]")
        extra = run_line(r)
        if extra:
            print(extra)
        for c in r.get("checks") or []:
            print("    " + check_line(c))
    if job.get("verification"):
        print(f"  verified: {job['verification']}")
    again = job.get("verify")
    if again:
        print(f"  checks run again ({again['ended_at']}): "
              + ("all passed" if again["passed"] else "not all passed"))
        for c in again["checks"]:
            print("    " + check_line(c))


def check_line(c: dict) -> str:
    """One check of a Run: pass/fail, name, exit code, duration, command."""
    mark = {"passed": "pass", "failed": "FAIL"}.get(c.get("outcome") or "", c.get("outcome"))
    code = f"exit {c['exit_code']}" if c.get("exit_code") is not None else "no exit code"
    took = f"{c['duration_s']:.1f} s" if c.get("duration_s") is not None else "?"
    return f"check {mark}  {c['name']}  ({code}, {took})  $ {c['run']}"
