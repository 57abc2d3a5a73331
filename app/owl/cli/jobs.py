"""`owl jobs ...`: read the Jobs, act on them."""

from __future__ import annotations

import argparse
import os
import sys

from owl import textsafe
from owl.cli.common import (
    EXIT_NO_DAEMON,
    EXIT_OK,
    EXIT_REFUSED,
    terminal_size,
    ask,
    id_number,
    json_flag,
    local_store,
    offline,
    print_json,
    verb,
    with_actions,
)
from owl.errors import NoDaemon, Refused, StoreError

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Accepting may sign the Job's commits, and signing may wait on a passphrase
# (owl.review.signing gives each signature two minutes): wait longer for it.
ACCEPT_TIMEOUT = 600.0
ACTIONS = ("list", "show", "drop", "accept", "extend", "move", "verify", "review", "diff", "reply")


def register_jobs(sub: Any) -> None:
    from owl.cli.carry import register_reply

    acts = with_actions(
        sub,
        "jobs",
        help="the Jobs: list, show, drop, accept, extend, move, verify, reply",
        description="The Jobs. `owl jobs` alone lists the queue.",
    )
    s = verb(
        acts,
        "list",
        help="the Jobs, by queue position, then id",
        description="The Jobs, by queue position, then id: as many as the screen holds "
        "(20 when not on a terminal), the live and those that wait for you first, then "
        "the head of the queue, and how many more there are.",
    )
    s.add_argument(
        "--all",
        action="store_true",
        help="every Job: done and cancelled ones too, and no page limit",
    )
    s.add_argument(
        "--limit",
        type=page_limit,
        metavar="N",
        help="at most N Jobs (default: what the screen holds; with --json, every Job)",
    )
    json_flag(
        s,
        "the Jobs as a JSON list on stdout, every one unless --limit is given "
        '(errors too, as {"error": ..., "exit": N})',
    )
    s.set_defaults(fn=cmd_list)
    s = verb(acts, "show", help="one Job with every Run, its checks and its log commands")
    _ids(s)
    json_flag(s)
    s.set_defaults(fn=cmd_show)
    s = verb(acts, "drop", help="cancel Jobs and remove their worktrees and branches")
    _ids(s)
    s.add_argument(
        "--force", action="store_true", help="also end a live Run and discard uncommitted changes"
    )
    json_flag(s)
    s.set_defaults(fn=_each("jobs.drop", lambda a: {"force": a.force}))
    s = verb(acts, "accept", help="keep the branch of a Job in review and remove its worktree")
    _ids(s)
    s.add_argument(
        "--merge", action="store_true", help="bring the branch into its base branch first"
    )
    s.add_argument(
        "--delete-branch", action="store_true", help="delete the branch once it is merged"
    )
    s.add_argument(
        "--anyway",
        action="store_true",
        help="accept a blocked or exhausted Job too, past its failing checks (recorded so)",
    )
    s.add_argument(
        "--unsigned",
        action="store_true",
        help="in a repository that signs its commits (commit.gpgSign), keep the Job's "
        "commits unsigned; otherwise Owl signs each of them here, with your key",
    )
    json_flag(s)
    s.set_defaults(
        fn=_each(
            "jobs.accept",
            lambda a: {
                "merge": a.merge,
                "delete_branch": a.delete_branch,
                "anyway": a.anyway,
                "unsigned": a.unsigned,
            },
            timeout=ACCEPT_TIMEOUT,
        )
    )
    s = verb(
        acts, "extend", help="give an exhausted or blocked Job more attempts, in the place it kept"
    )
    _ids(s)
    s.add_argument(
        "--attempts",
        type=id_number,
        default=None,
        metavar="N",
        help="how many more attempts (default 1)",
    )
    json_flag(s)
    s.set_defaults(fn=_each("jobs.extend", lambda a: {"attempts": a.attempts}))
    s = verb(acts, "move", help="put a Job at another place in the queue")
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.add_argument("position", type=id_number, metavar="POS", help="its new place (1 is the head)")
    json_flag(s)
    s.set_defaults(fn=cmd_move)
    s = verb(
        acts,
        "verify",
        help="run a Job's checks again on its branch (those of the "
        "commit it started from, or --checks-from REF)",
    )
    _ids(s)
    s.add_argument(
        "--checks-from",
        metavar="REF",
        default=None,
        help="run the checks another commit's .owl.toml declares (e.g. main, "
        "once you fixed a broken check there)",
    )
    json_flag(s)
    s.set_defaults(fn=_each("jobs.verify", lambda a: {"checks_from": a.checks_from}))
    s = verb(acts, "review", help="write a Job's review page and open it in the browser")
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.add_argument("--no-open", action="store_true", help="only write the page and print its path")
    s.set_defaults(fn=cmd_review)
    s = verb(
        acts, "diff", help="a Job's branch against its base (paged and coloured on a terminal)"
    )
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.set_defaults(fn=cmd_diff)
    register_reply(acts)


def _ids(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "ids",
        type=id_number,
        nargs="+",
        metavar="ID",
        help="a Job's id (several may be given; `owl jobs` lists them)",
    )


SCREEN = 20  # Jobs on a page when the output is not a terminal


def page_limit(text: str) -> int:
    """--limit N: 1 or more, and no more than a page may hold."""
    from owl.rules.bounds import MAX_PAGE

    value = id_number(text)
    if not 1 <= value <= MAX_PAGE:
        raise argparse.ArgumentTypeError(f"{text} is not between 1 and {MAX_PAGE}")
    return value


def page_size(a: argparse.Namespace) -> int | None:
    """How many Jobs `owl jobs` lists: --limit; else every one for --all and
    --json (a script reads them all); else what the terminal's height holds
    below the header, above the "and N more" line and the prompt."""
    if a.limit is not None:
        return int(a.limit)
    if a.all or a.json:
        return None
    if not sys.stdout.isatty():
        return SCREEN
    return max(5, terminal_size()[1] - 3)


def cmd_list(a: argparse.Namespace) -> int:
    code, limit = EXIT_OK, page_size(a)
    try:
        page = _page(ask("jobs.list", {"all": a.all, "limit": limit}), limit)
    except NoDaemon:
        try:
            from owl.verbs.views import jobs_list, jobs_page

            page = offline(
                lambda: (
                    {"jobs": jobs_list(local_store(), a.all), "more": 0}
                    if limit is None
                    else jobs_page(local_store(), a.all, limit)
                )
            )
        except StoreError:
            page = {"jobs": [], "more": 0}
        code = _no_daemon()  # after the read: a damaged file is its one line alone
    jobs, more = page["jobs"], page["more"]
    if a.json:
        print_json(jobs)
    elif not jobs:
        print("no jobs" + ("" if a.all else " (owl jobs --all shows done and cancelled ones)"))
    else:
        print(job_table([textsafe.view(j) for j in jobs]))
    if more:
        print(
            f"… and {more} more (owl jobs --all)",
            file=sys.stderr if a.json else sys.stdout,
        )
    return code


def _page(answer: Any, limit: int | None) -> dict:
    """The daemon's `jobs.list`: a list of every Job, or with a limit a page."""
    if limit is None:
        return {"jobs": answer, "more": 0}
    return {"jobs": answer["jobs"], "more": int(answer["more"])}


def _no_daemon() -> int:
    """A read verb with no daemon: it answers from the database, says so on
    stderr once its answer is out, and exits 3 (the README's promise)."""
    import atexit

    atexit.register(
        lambda: print(
            "owl: no Owl daemon is running (start one with: owl daemon --detach)", file=sys.stderr
        )
    )
    return EXIT_NO_DAEMON


def job_table(jobs: list[dict], now: float | None = None, width: int | None = None) -> str:
    """`owl jobs`: a header and one line a Job; the title takes what width is left."""
    import time

    from owl.rules.timefmt import duration, parse_iso

    now = time.time() if now is None else now
    if width is None:  # a terminal's width; a pipe or a file gets whole titles
        width = terminal_size()[0] if sys.stdout.isatty() else 1 << 30
    rows = []
    for j in jobs:
        created = parse_iso(j.get("created_at"))
        title = j["title"] + (f"  ({j['reason']})" if j.get("reason") else "")
        rows.append(
            (
                str(j["id"]),
                str(j["position"] or "-"),
                j["state"],
                j["agent"] or "",
                os.path.basename(j["project"] or "") or "/",
                duration(now - created, coarse=True) if created else "?",
                title,
            )
        )
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
        show_job(textsafe.view(job, frozenset({"last_message"})))
    return code


def _offline_job(job_id: int) -> dict:
    from owl.verbs.views import job_view

    try:
        store = offline(local_store)
    except StoreError as e:
        raise Refused(str(e)) from None
    row = offline(lambda: store.job(job_id))
    if row is None:
        raise Refused(f"no job {job_id}") from None
    return offline(lambda: job_view(store, row))


def _each(verb_name: str, extra=lambda a: {}, timeout: float = 60.0):
    """A verb that acts on each id given, in order, and says what it did to each."""

    def run(a: argparse.Namespace) -> int:
        outs, failed = [], None
        for job_id in a.ids:
            try:
                out = ask(verb_name, {"id": job_id, **extra(a)}, timeout=timeout)
            except Refused as e:
                if len(a.ids) == 1:
                    raise
                failed = e  # the others are still done; each says what happened
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
        print(
            textsafe.block(out.get("message"))
            or f"job {out['id']} is {out['state']}"
            + (f" at position {out['position']}" if out.get("position") else "")
        )
