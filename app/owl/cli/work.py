"""The verbs that act on live work: start, pause, resume, stop, shift; and the
processes themselves: daemon, tray; and the hidden manual machine."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from owl.cli.common import EXIT_OK, EXIT_USAGE, ask, json_flag, print_json, verb
from owl.timefmt import duration


def register(sub: Any) -> None:
    s = verb(sub, "tray", help="the tray icon, with the daemon in the same process (what "
             "plain `owl` runs)")
    s.set_defaults(fn=cmd_tray)
    s = verb(sub, "daemon", help="run the daemon in the foreground, without a tray")
    s.set_defaults(fn=cmd_daemon)

    for name, text in (
        ("start", "start one Run now, for the head of the queue, even though the machine is "
                  "in use; input does not freeze a Run started this way"),
        ("pause", "freeze every live Run and hold: nothing new starts until `owl resume`; a "
                  "paused Run still ends when its grace window passes"),
        ("resume", "lift the hold: Runs you paused go on (or wait, frozen, for the machine "
                   "to be idle again)"),
    ):
        s = verb(sub, name, help=text)
        json_flag(s)
        s.set_defaults(fn=simple(name))
    s = verb(sub, "stop", help="end this work: freeze the live Runs and end them when "
             "the grace window passes (--force: now); queued Jobs stay queued",
             description="End the live Runs (this work, not work in general): they "
             "are frozen and asked to stop when the grace window passes, or at once "
             "with --force; an agent still there 5 s later is killed. Their Jobs go "
             "back to the queue in their place. During a Shift it stops this work, "
             "not the Shift: `owl shift stop` ends that.")
    s.add_argument("--force", action="store_true", help="end them now")
    json_flag(s)
    s.set_defaults(fn=simple("stop"))

    sh = verb(sub, "shift", help="work while you are here: start, stop, or status of a Shift",
              description="A Shift is a bounded time in which Runs start and are not frozen "
              "although the machine is in use. Caps still apply; power is ignored unless "
              "--require-power. Starting one while one is on extends it to the later end "
              "(unless --replace). When it ends, its Runs are let finish. `owl pause` holds "
              "a Shift; its clock keeps running.")
    acts = sh.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = verb(acts, "start", help="start a Shift, or extend the one that is on")
    s.add_argument("--for", dest="length", default="1h", metavar="DURATION",
                   help="how long, e.g. 30m, 1h30m (default 1h)")
    s.add_argument("--until-empty", action="store_true", help="end early once the queue is empty")
    s.add_argument("--require-power", action="store_true",
                   help="freeze and start nothing on battery")
    s.add_argument("--replace", action="store_true",
                   help="replace the current Shift instead of extending it")
    json_flag(s)
    s.set_defaults(fn=cmd_shift_start)
    s = verb(acts, "stop", help="end the Shift; its Runs are let finish")
    json_flag(s)
    s.set_defaults(fn=cmd_shift_stop)
    s = verb(acts, "status", help="whether a Shift is on, and how long it has left")
    json_flag(s)
    s.set_defaults(fn=cmd_shift_status)

    s = verb(sub, "machine", help="drive the manual machine (OWL_MACHINE=manual)")
    s.add_argument("event", choices=["input", "idle", "battery", "ac", "power-unknown"],
                   help="what the machine does now")
    s.set_defaults(fn=cmd_machine)


def cmd_daemon(a: argparse.Namespace) -> int:
    from owl.daemon import run_foreground

    return run_foreground()


def cmd_tray(a: argparse.Namespace) -> int:
    from owl.trayd import run

    return run()


def simple(name: str) -> Callable[[argparse.Namespace], int]:
    def run(a: argparse.Namespace) -> int:
        args = {"force": a.force} if name == "stop" else {}
        out = ask(name, args)
        if getattr(a, "json", False):
            print_json(out)
        elif isinstance(out, dict) and out.get("message"):
            print(out["message"])
        elif name == "start" and isinstance(out, dict) and "run_id" in out:
            print(f"run {out['run_id']} of job {out['job_id']} started; input does not "
                  "freeze it")
        else:
            print(json.dumps(out))
        return EXIT_OK
    return run


def cmd_shift_start(a: argparse.Namespace) -> int:
    from owl.config import parse_duration

    try:
        length = parse_duration(a.length)
    except ValueError as e:
        print(f"owl: --for: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = ask("shift.start", {"for_s": length, "until_empty": a.until_empty,
                              "require_power": a.require_power, "replace": a.replace})
    _said(out, a.json)
    return EXIT_OK


def cmd_shift_stop(a: argparse.Namespace) -> int:
    _said(ask("shift.stop"), a.json)
    return EXIT_OK


def cmd_shift_status(a: argparse.Namespace) -> int:
    out = ask("shift.status")
    if a.json:
        print_json(out)
    elif out is None:
        print("no Shift")
    elif out.get("ended"):
        print(out["text"])
    else:
        print(f"Shift on · {duration(out['left_s'])} left (until {out['ends_at']})"
              + (" · until the queue is empty" if out["until_empty"] else "")
              + (" · needs AC power" if out["require_power"] else "")
              + (" · held by pause" if out["held"] else ""))
    return EXIT_OK


def _said(out: dict, as_json: bool) -> None:
    if as_json:
        print_json(out)
    else:
        print(out["message"])


def cmd_machine(a: argparse.Namespace) -> int:
    ask("machine", {"event": a.event})
    return EXIT_OK
