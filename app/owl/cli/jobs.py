"""`owl add` and `owl jobs ...`: queue Jobs, read them, act on them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from owl import textsafe
from owl.cli.carry import register_reply
from owl.cli.common import (EXIT_NO_DAEMON, EXIT_OK, EXIT_REFUSED, ask, id_number, json_flag,
                            local_store, offline, print_json, verb)
from owl.errors import NoDaemon, Refused, StoreError

ACTIONS = ("list", "show", "drop", "accept", "extend", "move", "verify", "review", "diff",
           "reply")


def register(sub: Any) -> None:
    s = verb(sub, "add", help="queue a Job: a prompt for an agent, in a project (git repo)",
             description="Queue a Job. It runs in a git worktree and branch of its own when "
             "the machine is idle. Prints the new Job's id. The words of an unquoted prompt "
             "are joined with single spaces; quote it to keep the shell off *, $ and the like.")
    s.add_argument("prompt", nargs="+", metavar="PROMPT",
                   help="what the agent should do ('-' reads it from stdin)")
    s.add_argument("--project", metavar="DIR", help="the git repository to work in "
                   "(default: the current directory)")
    s.add_argument("--agent", metavar="NAME", help="an agent from the config (default: "
                   "agent.default)")
    s.add_argument("--attempts", type=id_number, metavar="N", help="how many failed Runs before the "
                   "Job is exhausted (default: jobs.attempts)")
    _no_start(s)
    json_flag(s, "print the new Job as `owl jobs show --json` gives it")
    s.set_defaults(fn=cmd_add)

    j = verb(sub, "jobs", help="the Jobs: list, show, drop, accept, extend, move, verify, "
             "reply",
             description="The Jobs. `owl jobs` alone lists the queue.")
    acts = j.add_subparsers(dest="action", metavar="ACTION")
    s = verb(acts, "list", help="the Jobs, by queue position, then id")
    s.add_argument("--all", action="store_true", help="include done and cancelled Jobs")
    json_flag(s)
    s.set_defaults(fn=cmd_list)
    s = verb(acts, "show", help="one Job with every Run, its checks and its log commands")
    _ids(s)
    json_flag(s)
    s.set_defaults(fn=cmd_show)
    s = verb(acts, "drop", help="cancel Jobs and remove their worktrees and branches")
    _ids(s)
    s.add_argument("--force", action="store_true",
                   help="also end a live Run and discard uncommitted changes")
    json_flag(s)
    s.set_defaults(fn=_each("jobs.drop", lambda a: {"force": a.force}))
    s = verb(acts, "accept", help="keep the branch of a Job in review and remove its worktree")
    _ids(s)
    s.add_argument("--merge", action="store_true",
                   help="bring the branch into its base branch first")
    s.add_argument("--delete-branch", action="store_true",
                   help="delete the branch once it is merged")
    json_flag(s)
    s.set_defaults(fn=_each("jobs.accept", lambda a: {"merge": a.merge,
                                                      "delete_branch": a.delete_branch}))
    s = verb(acts, "extend", help="give an exhausted or blocked Job more attempts, in the "
             "place it kept")
    _ids(s)
    s.add_argument("--attempts", type=id_number, default=None, metavar="N",
                   help="how many more attempts (default 1)")
    json_flag(s)
    s.set_defaults(fn=_each("jobs.extend", lambda a: {"attempts": a.attempts}))
    s = verb(acts, "move", help="put a Job at another place in the queue")
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.add_argument("position", type=id_number, metavar="POS", help="its new place (1 is the head)")
    json_flag(s)
    s.set_defaults(fn=cmd_move)
    s = verb(acts, "verify", help="run a Job's checks again on its branch")
    _ids(s)
    json_flag(s)
    s.set_defaults(fn=_each("jobs.verify"))
    s = verb(acts, "review", help="write a Job's review page and open it in the browser")
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.add_argument("--no-open", action="store_true",
                   help="only write the page and print its path")
    s.set_defaults(fn=cmd_review)
    s = verb(acts, "diff", help="a Job's branch against its base (paged and coloured on a "
             "terminal)")
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.set_defaults(fn=cmd_diff)
    register_reply(acts)


def _ids(s: argparse.ArgumentParser) -> None:
    s.add_argument("ids", type=id_number, nargs="+", metavar="ID", help="a Job's id (several may be "
                   "given; `owl jobs` lists them)")


def _no_start(s: argparse.ArgumentParser) -> None:
    s.add_argument("--no-start", action="store_true", help="do not start the daemon when none "
                   "runs (also OWL_NO_AUTOSTART=1)")


def cmd_add(a: argparse.Namespace) -> int:
    prompt = " ".join(a.prompt)
    if a.prompt == ["-"]:
        prompt = sys.stdin.read()
    project = os.path.abspath(a.project or os.getcwd())
    from owl.cli import spawn

    job = spawn.ask_starting(a, "add", {"prompt": prompt, "project": project, "agent": a.agent,
                      "attempts": a.attempts})
    if a.json:
        print_json(job)
    else:
        print(job["id"])
    return EXIT_OK


def cmd_list(a: argparse.Namespace) -> int:
    code = EXIT_OK
    try:
        jobs = ask("jobs.list", {"all": a.all})
    except NoDaemon:
        try:
            from owl.views import jobs_list

            jobs = offline(lambda: jobs_list(local_store(), a.all))
        except StoreError:
            jobs = []
        code = _no_daemon()       # after the read: a damaged file is its one line alone
    if a.json:
        print_json(jobs)
    elif not jobs:
        print("no jobs" + ("" if a.all else " (owl jobs --all shows done and cancelled ones)"))
    else:
        print(job_table([textsafe.tree(j) for j in jobs]))
    return code


def _no_daemon() -> int:
    """A read verb with no daemon: it answers from the database, says so on
    stderr once its answer is out, and exits 3 (the README's promise)."""
    import atexit

    atexit.register(lambda: print("owl: no Owl daemon is running (start one with: owl daemon "
                                  "--detach)", file=sys.stderr))
    return EXIT_NO_DAEMON


def job_table(jobs: list[dict], now: float | None = None, width: int | None = None) -> str:
    """`owl jobs`: a header and one line a Job; the title takes what width is left."""
    import shutil
    import time

    from owl.timefmt import duration, parse_iso

    now = time.time() if now is None else now
    if width is None:          # a terminal's width; a pipe or a file gets whole titles
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 1 << 30
    rows = []
    for j in jobs:
        created = parse_iso(j.get("created_at"))
        title = j["title"] + (f"  ({j['reason']})" if j.get("reason") else "")
        rows.append((str(j["id"]), str(j["position"] or "-"), j["state"], j["agent"] or "",
                     os.path.basename(j["project"] or "") or "/",
                     duration(now - created, coarse=True) if created else "?", title))
    head = ("ID", "POS", "STATE", "AGENT", "PROJECT", "AGE", "TITLE")
    cols = [max(len(r[i]) for r in (head, *rows)) for i in range(6)]
    right = {0, 1}

    def line(r: tuple[str, ...]) -> str:
        cells = [r[i].rjust(cols[i]) if i in right else r[i].ljust(cols[i]) for i in range(6)]
        text = "  ".join(cells) + "  "
        room = max(20, width - len(text))
        t = r[6] if len(r[6]) <= room else r[6][: room - 1] + "…"
        return text + t
    return "\n".join(line(r) for r in (head, *rows))


def cmd_show(a: argparse.Namespace) -> int:
    from owl.cli.jobview import show_job

    jobs, code = [], EXIT_OK
    for job_id in a.ids:
        try:
            jobs.append(ask("jobs.show", {"id": job_id}))
        except NoDaemon:
            jobs.append(_offline_job(job_id))
            code = EXIT_NO_DAEMON
    if code != EXIT_OK:
        _no_daemon()
    if a.json:
        print_json(jobs[0] if len(jobs) == 1 else jobs)
        return code
    for n, job in enumerate(jobs):
        if n:
            print()
        show_job(textsafe.tree(job))
    return code


def _offline_job(job_id: int) -> dict:
    from owl.views import job_view

    try:
        store = offline(local_store)
    except StoreError as e:
        raise Refused(str(e)) from None
    row = offline(lambda: store.job(job_id))
    if row is None:
        raise Refused(f"no job {job_id}") from None
    return offline(lambda: job_view(store, row))


def _each(verb_name: str, extra=lambda a: {}):
    """A verb that acts on each id given, in order, and says what it did to each."""
    def run(a: argparse.Namespace) -> int:
        outs, failed = [], None
        for job_id in a.ids:
            try:
                out = ask(verb_name, {"id": job_id, **extra(a)})
            except Refused as e:
                if len(a.ids) == 1:
                    raise
                failed = e      # the others are still done; each says what happened
                print(f"owl: {textsafe.line(str(e))}", file=sys.stderr)
                outs.append({"id": job_id, "error": textsafe.line(str(e)), "exit": EXIT_REFUSED})
                continue
            outs.append(out)
            if not a.json:
                _said(out, False)
        if a.json:
            print_json(outs[0] if len(a.ids) == 1 else outs)
        return EXIT_REFUSED if failed else EXIT_OK
    return run


def cmd_review(a: argparse.Namespace) -> int:
    from owl.cli.common import paths
    from owl.review import commands

    return commands.review(paths(), a.id, open_it=not a.no_open)


def cmd_diff(a: argparse.Namespace) -> int:
    from owl.cli.common import paths
    from owl.review import commands

    return commands.diff(paths(), a.id)


def cmd_move(a: argparse.Namespace) -> int:
    _said(ask("jobs.move", {"id": a.id, "position": a.position}), a.json)
    return EXIT_OK


def _said(out: dict, as_json: bool) -> None:
    if as_json:
        print_json(out)
    else:
        print(textsafe.block(out.get("message")) or f"job {out['id']} is {out['state']}"
              + (f" at position {out['position']}" if out.get("position") else ""))
