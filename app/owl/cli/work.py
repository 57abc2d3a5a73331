"""The verbs that act on live work: start, pause, resume, stop, shift; and the
processes themselves: daemon, tray; and the hidden manual machine."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from owl import textsafe
from owl.cli.common import EXIT_OK, ask, json_flag, print_json, verb, with_actions
from owl.rules.timefmt import duration


def register_start(sub: Any) -> None:
    s = verb(
        sub,
        "start",
        help="start one Run now, for the head of the queue, even though "
        "the machine is in use; input does not freeze a Run started this way",
    )
    _no_start(s)
    json_flag(s)
    s.set_defaults(fn=simple("start"))


HOLDS = {
    "pause": "freeze every live Run and hold: nothing new starts until `owl resume`; a "
    "paused Run still ends when its grace window passes (it is not a way to "
    "keep a Run for later)",
    "resume": "lift the hold: Runs you paused go on (or wait, frozen, for the machine "
    "to be idle again)",
}


def register_pause(sub: Any) -> None:
    _register_hold(sub, "pause")


def register_resume(sub: Any) -> None:
    _register_hold(sub, "resume")


def _register_hold(sub: Any, name: str) -> None:
    s = verb(sub, name, help=HOLDS[name])
    json_flag(s)
    s.set_defaults(fn=simple(name))


def register_stop(sub: Any) -> None:
    s = verb(
        sub,
        "stop",
        help="end this work now: the live Runs are asked to end, killed 5 s "
        "later; queued Jobs stay queued",
        description="End the live Runs (this work, not work in general): each is asked "
        "to end (SIGTERM) and killed 5 s later if still there; with --after-grace they are "
        "frozen instead and end when the grace window passes, unless resumed. Their Jobs "
        "go back to the queue in their place. During a Shift it stops this work, not the "
        "Shift: `owl shift stop` ends that.",
    )
    s.add_argument(
        "--after-grace",
        action="store_true",
        help="freeze them now and end them "
        "when the grace window passes (owl resume in between lets them go on)",
    )
    s.add_argument("--force", action="store_true", help=argparse.SUPPRESS)  # the old spelling
    json_flag(s)
    s.set_defaults(fn=simple("stop"))


def register_shift(sub: Any) -> None:
    acts = with_actions(
        sub,
        "shift",
        help="work while you are here: start, stop, or status of a Shift",
        description="A Shift is a bounded time in which Runs start and are not frozen "
        "although the machine is in use. Caps still apply; power is ignored unless "
        "--require-power. Starting one while one is on extends it to the later end "
        "(unless --replace). When it ends, its Runs freeze at once if you are here "
        "(the machine is yours again), and carry on if not. `owl pause` holds "
        "a Shift; its clock keeps running.",
    )
    s = verb(acts, "start", help="start a Shift, or extend the one that is on")
    s.add_argument(
        "--for",
        dest="length",
        default="1h",
        metavar="DURATION",
        help="how long, e.g. 30m, 1h30m (default 1h)",
    )
    s.add_argument("--until-empty", action="store_true", help="end early once the queue is empty")
    s.add_argument(
        "--require-power", action="store_true", help="freeze and start nothing on battery"
    )
    s.add_argument(
        "--replace", action="store_true", help="replace the current Shift instead of extending it"
    )
    s.add_argument(
        "--spend",
        action="store_true",
        help="let Runs use the agents' usage windows past the headroom [budget] keeps "
        "(money caps still hold)",
    )
    _no_start(s)
    json_flag(s)
    s.set_defaults(fn=cmd_shift_start, parser=s)
    s = verb(acts, "stop", help="end the Shift; its Runs then freeze if you are here")
    json_flag(s)
    s.set_defaults(fn=cmd_shift_stop)
    s = verb(acts, "status", help="whether a Shift is on, and how long it has left")
    json_flag(s)
    s.set_defaults(fn=cmd_shift_status)


def register_tray(sub: Any) -> None:
    s = verb(
        sub,
        "tray",
        help="the tray icon, with the daemon in the same process (what plain `owl` runs)",
    )
    s.set_defaults(fn=cmd_tray)


def register_daemon(sub: Any) -> None:
    s = verb(
        sub,
        "daemon",
        help="run the daemon in the foreground, without a tray (--detach: in the background)",
        description="Run the daemon without a tray: "
        "in the foreground until Ctrl-C or SIGTERM, or with --detach in the background, "
        "its output appended to owl.log in Owl's log folder. `owl add`, `owl start` "
        "and `owl shift start` start it this way themselves when none runs.",
    )
    s.add_argument(
        "action",
        nargs="?",
        choices=["stop", "status"],
        metavar="stop|status",
        help="stop: stop the daemon that runs (its Runs asked to end, killed 5 s "
        "later, as the tray's Quit does); status: whether one runs, its pid and log",
    )
    s.add_argument(
        "--detach",
        action="store_true",
        help="start it in the background and return once it answers (exit 0 if one already runs)",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_daemon)


def register_machine(sub: Any) -> None:
    s = verb(
        sub,
        "machine",
        help="tell the manual machine (OWL_MACHINE=manual) what the "
        "machine does: for headless machines and scripts",
    )
    s.add_argument(
        "event",
        choices=["input", "idle", "battery", "ac", "power-unknown"],
        metavar="EVENT",
        help="input (someone is here), idle (nobody is, as if "
        "idle.after had passed), battery, ac or power-unknown",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_machine)


def _no_start(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--no-start",
        action="store_true",
        help="do not start the daemon when none runs (also OWL_NO_AUTOSTART=1)",
    )


def cmd_daemon(a: argparse.Namespace) -> int:
    if a.action is not None:
        from owl.cli import daemonctl

        return daemonctl.stop(a) if a.action == "stop" else daemonctl.status(a)
    if a.detach:
        from owl.cli import spawn

        return spawn.detach()
    from owl.daemon.main import run_foreground

    return run_foreground()


def cmd_tray(a: argparse.Namespace) -> int:
    from owl.daemon.trayd import run

    return run()


def simple(name: str) -> Callable[[argparse.Namespace], int]:
    def run(a: argparse.Namespace) -> int:
        args = {"force": not a.after_grace} if name == "stop" else {}
        if name == "start":
            from owl.cli import spawn

            out = spawn.ask_starting(a, name, args)
        else:
            out = ask(name, args)
        if getattr(a, "json", False):
            print_json(out)
        elif isinstance(out, dict) and out.get("message"):
            print(textsafe.block(out["message"]))
        elif name == "start" and isinstance(out, dict) and "run_id" in out:
            print(f"run {out['run_id']} of job {out['job_id']} started; input does not freeze it")
        else:
            print(json.dumps(out))
        return EXIT_OK

    return run


def cmd_shift_start(a: argparse.Namespace) -> int:
    from owl.rules.bounds import MAX_SHIFT_S
    from owl.settings.config import parse_duration

    try:
        length = parse_duration(a.length)
        if length > MAX_SHIFT_S:
            raise ValueError(f"{a.length!r} is longer than a Shift may be (at most 7d)")
        if length <= 0:
            raise ValueError(f"{a.length!r} is no time at all (a Shift lasts more than 0s)")
    except ValueError as e:
        a.parser.error(f"--for: {e}")
    from owl.cli import spawn

    out = spawn.ask_starting(
        a,
        "shift.start",
        {
            "for_s": length,
            "until_empty": a.until_empty,
            "require_power": a.require_power,
            "replace": a.replace,
            "spend": a.spend,
        },
    )
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
        import time

        from owl.rules.timefmt import clock, parse_iso

        ends = parse_iso(out.get("ends_at"))
        until = clock(ends, time.time()) if ends else out.get("ends_at")
        print(
            f"Shift on · {duration(out['left_s'], coarse=True)} left (until {until})"
            + (" · until the queue is empty" if out["until_empty"] else "")
            + (" · needs AC power" if out["require_power"] else "")
            + (" · held by pause" if out["held"] else "")
        )
    return EXIT_OK


def _said(out: dict, as_json: bool) -> None:
    if as_json:
        print_json(out)
    else:
        print(textsafe.block(out["message"]))


MACHINE_SAID = {
    "input": "the manual machine is in use: a live Run freezes (its grace window starts)",
    "idle": "the manual machine is idle: Runs may start, and a frozen one carries on",
    "battery": "the manual machine is on battery: nothing starts while idle.require_ac_power",
    "ac": "the manual machine is on AC power",
    "power-unknown": "the manual machine's power is unknown (it does not count as AC)",
}


def cmd_machine(a: argparse.Namespace) -> int:
    ask("machine", {"event": a.event})
    said = MACHINE_SAID[a.event]
    if getattr(a, "json", False):
        print_json({"event": a.event, "message": said})
    else:
        print(said)
    return EXIT_OK
