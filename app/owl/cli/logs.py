"""`owl logs JOB`: the output of a Job's latest Run (or another, or a check's),
under a one-line header saying whose log it is.

Reads the database read-only, so it answers with no daemon running.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from owl import textsafe
from owl.cli.common import EXIT_OK, id_number, json_flag, local_store, paths, verb
from owl.errors import Refused, StoreError
from owl.rules.jobtable import QUEUED


def register(sub: Any) -> None:
    s = verb(
        sub,
        "logs",
        help="print a Job's latest Run's log (claude's stream-json as "
        "readable lines), or another Run's, or a check's",
        description="Print the log of a Job's latest Run under a one-line header "
        "(job · run · attempt · outcome). `owl jobs show JOB` lists each Run's log "
        "command.",
    )
    s.add_argument(
        "job",
        type=id_number,
        nargs="?",
        metavar="JOB",
        help="the Job's id (may be left out with --run)",
    )
    s.add_argument(
        "--run",
        type=id_number,
        metavar="N",
        help="this Run of the Job instead of its latest (`owl jobs show JOB` lists them)",
    )
    s.add_argument(
        "--check",
        metavar="NAME",
        help="the output of this check of the Run (as named in .owl.toml)",
    )
    s.add_argument("-f", "--follow", action="store_true", help="keep printing until the Run ends")
    s.add_argument("--raw", action="store_true", help="print the log as written, with no header")
    json_flag(s, 'one JSON object a line: {"run": ID, "line": TEXT}, no header')
    s.set_defaults(fn=cmd_logs, parser=s)


def _store():
    try:
        return local_store()
    except StoreError as e:
        raise Refused(str(e)) from None


def resolve(store, job_id: int | None, run_id: int | None) -> tuple[dict, dict]:
    """(job view, run view) for `owl logs`, or Refused saying what exists."""
    from owl.verbs.views import job_view

    if job_id is None and run_id is None:
        raise Refused("say which Job: owl logs JOB (or owl logs --run N)")
    if job_id is None:
        run = store.run(run_id)
        if run is None:
            raise Refused(f"no run {run_id}")
        job_id = run["job_id"]
    row = store.job(job_id)
    if row is None:
        raise Refused(f"no job {job_id}")
    job = job_view(store, row)
    runs = job["runs"]
    if not runs:
        raise Refused(f"job {job_id} has not run yet (it is {job['state']})")
    if run_id is None:
        return job, runs[-1]
    for r in runs:
        if r["id"] == run_id:
            return job, r
    raise Refused(
        f"run {run_id} is not job {job_id}'s (its runs: {', '.join(str(r['id']) for r in runs)})"
    )


def _wait_for_a_run(store, job_id: int) -> None:
    """`owl logs JOB -f` on a Job that has not run yet waits for its first Run
    (saying so on stderr), as `tail -F` waits for a file."""
    import time

    said = False
    while True:
        row = store.job(job_id)
        if row is None or store.runs(job_id):
            return  # resolve() says "no job", or there is a Run
        if row["state"] not in QUEUED:
            return  # it will not run: resolve() says what it is
        if not said:
            print(
                f"owl: job {job_id} has not started yet; waiting for its first Run "
                "(Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(0.2)


def cmd_logs(a: argparse.Namespace) -> int:
    from owl.cli.jobview import run_label

    if a.job is None and a.run is None:
        a.parser.error("say which Job: owl logs JOB (or owl logs --run N)")
    store = _store()
    if a.follow and a.job is not None and a.run is None:
        _wait_for_a_run(store, a.job)
    job, run = resolve(store, a.job, a.run)
    header = not (a.raw or a.json)
    if a.check is not None:
        return _check_log(job, run, a.check, header=header, as_json=a.json, raw=a.raw)
    if header:
        print(textsafe.line(run_label(job["id"], run)), flush=True)
    from owl.verbs.logs import show

    return show(paths(), run["id"], follow=a.follow, raw=a.raw, as_json=a.json)


def _check_log(
    job: dict, run: dict, name: str, *, header: bool, as_json: bool, raw: bool = False
) -> int:
    checks = run.get("checks") or []
    found = next((c for c in checks if c["name"] == name), None)
    if found is None:
        names = ", ".join(repr(c["name"]) for c in checks) or "none ran"
        raise Refused(f"run {run['id']} has no check {name!r} (its checks: {names})")
    text = found.get("output") or ""
    if found.get("log"):
        from pathlib import Path

        try:
            text = Path(found["log"]).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass  # the stored output (its tail) is what is left
    if header:
        code = found.get("exit_code")
        print(
            f"job {job['id']} · run {run['id']} · check {found['name']} · {found['outcome']}"
            + (f" (exit {code})" if code is not None else "")
        )
    for line in text.splitlines():
        if as_json:
            print(
                json.dumps(
                    {"run": run["id"], "check": found["name"], "line": line}, ensure_ascii=False
                )
            )
        elif raw:
            print(line)
        else:
            print(textsafe.line(line))
    sys.stdout.flush()
    return EXIT_OK
