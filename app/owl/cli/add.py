"""`owl add`: queue a Job.

A module of its own, apart from `owl jobs`: it is the verb scripts run most,
and it imports only what queueing needs (the socket client, and the daemon's
start when none runs).
"""

from __future__ import annotations

import argparse
import os
import sys

from owl.cli.common import EXIT_OK, id_number, json_flag, print_json, verb
from owl.errors import NoDaemon

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def register(sub: Any) -> None:
    s = verb(
        sub,
        "add",
        help="queue a Job: a prompt for an agent, in a project (git repo)",
        description="Queue a Job. It runs in a git worktree and branch of its own when "
        "the machine is idle. Prints the new Job's id. The words of an unquoted prompt "
        "are joined with single spaces; quote it to keep the shell off *, $ and the like.",
    )
    s.add_argument(
        "prompt",
        nargs="+",
        metavar="PROMPT",
        help="what the agent should do ('-' reads it from stdin)",
    )
    s.add_argument(
        "--project",
        metavar="DIR",
        help="the git repository to work in (default: the current directory)",
    )
    s.add_argument(
        "--agent",
        metavar="NAME",
        help="a built-in agent (claude, codex, gemini, opencode, "
        "copilot, pi, aider) or one from the config (default: agent.default); several in order, "
        "claude,codex: the next carries the Job on while the first waits on a limit",
    )
    s.add_argument(
        "--attempts",
        type=id_number,
        metavar="N",
        help="how many failed Runs before the Job is exhausted (default: jobs.attempts)",
    )
    _no_start(s)
    json_flag(s, "print the new Job as `owl jobs show --json` gives it")
    s.set_defaults(fn=cmd_add)


def _no_start(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--no-start",
        action="store_true",
        help="do not start the daemon when none runs (also OWL_NO_AUTOSTART=1)",
    )


def cmd_add(a: argparse.Namespace) -> int:
    prompt = " ".join(a.prompt)
    if a.prompt == ["-"]:
        prompt = sys.stdin.read()
    project = os.path.abspath(a.project or os.getcwd())
    from owl.cli import spawn

    args = {"prompt": prompt, "project": project, "agent": a.agent, "attempts": a.attempts}
    try:
        job = spawn.ask_starting(a, "add", args)
    except NoDaemon:
        # --no-start (or OWL_NO_AUTOSTART) and no daemon: queued in the database,
        # under the daemon's own lock, for the next daemon to find.
        from owl.cli.common import paths
        from owl.verbs import offline as offline_add

        job = offline_add.add(paths(), prompt, project, a.agent, a.attempts)
        print(
            f"owl: no daemon is running; job {job['id']} is queued for the next one "
            "(owl daemon --detach starts one)",
            file=sys.stderr,
        )
    if a.json:
        print_json(job)
    else:
        print(job["id"])
    return EXIT_OK
