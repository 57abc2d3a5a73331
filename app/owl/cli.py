"""The `owl` command: parse the verb, ask the daemon, print the answer.

Exit codes: 0 done; 1 refused (one line on stderr says why); 2 usage;
3 no daemon running (read verbs still answer from the database first).

This module is on the path of every `owl` call, so it imports only what the
verb needs: argparse, json and the socket client at the top, the rest inside
the verb (no pynput or pystray: they need a display just to import).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from owl import __version__
from owl.errors import NoDaemon, Refused, StoreError

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_NO_DAEMON = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2 with one line
        self.print_usage(sys.stderr)
        print(f"owl: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _paths():
    from owl.paths import get_paths

    return get_paths()


def _ask(verb: str, args: dict[str, Any] | None = None) -> Any:
    from owl.control.client import ask

    return ask(_paths().socket, verb, args)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _fmt_secs(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} m"
    if s >= 60:
        return f"{s // 60} m"
    return f"{s} s"


def _clock(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 60}:{s % 60:02d}"


# ------------------------------------------------------------------- verbs

def cmd_daemon(a: argparse.Namespace) -> int:
    from owl.daemon import run_foreground

    return run_foreground()


def cmd_tray(a: argparse.Namespace) -> int:
    from owl.trayd import run

    return run()


def cmd_add(a: argparse.Namespace) -> int:
    prompt = a.prompt
    if prompt == "-":
        prompt = sys.stdin.read()
    project = os.path.abspath(a.project or os.getcwd())
    job = _ask("add", {"prompt": prompt, "project": project, "agent": a.agent,
                       "attempts": a.attempts})
    if a.json:
        _print_json(job)
    else:
        print(job["id"])
    return EXIT_OK


def _local_store():
    from owl.store import Store

    return Store(_paths().db, readonly=True)


def cmd_jobs(a: argparse.Namespace) -> int:
    action = a.action or "list"
    if action == "list":
        try:
            jobs = _ask("jobs.list", {"all": a.all})
        except NoDaemon:
            try:
                from owl.daemon import _jobs_list

                jobs = _jobs_list(_local_store(), a.all)
            except StoreError:
                jobs = []
        if a.json:
            _print_json(jobs)
        elif not jobs:
            print("no jobs")
        else:
            for j in jobs:
                pos = f"#{j['position']}" if j["position"] else "  "
                extra = f"  ({j['reason']})" if j.get("reason") else ""
                print(f"{j['id']:>5}  {pos:>5}  {j['state']:<10} {j['title']}{extra}")
        return EXIT_OK
    if a.id is None:
        print(f"owl: jobs {action} needs a job id", file=sys.stderr)
        return EXIT_USAGE
    if action == "show":
        try:
            job = _ask("jobs.show", {"id": a.id})
        except NoDaemon:
            from owl.views import job_view

            try:
                store = _local_store()
            except StoreError as e:
                raise Refused(str(e)) from None
            row = store.job(a.id)
            if row is None:
                raise Refused(f"no job {a.id}") from None
            job = job_view(store, row)
        _show_job(job, a.json)
        return EXIT_OK
    if action == "drop":
        out = _ask("jobs.drop", {"id": a.id, "force": a.force})
    elif action == "accept":
        out = _ask("jobs.accept", {"id": a.id})
    elif action == "extend":
        out = _ask("jobs.extend", {"id": a.id, "attempts": a.attempts})
    elif action == "move":
        if a.position is None or not a.position.isdigit():
            print("owl: jobs move needs a position (1 is the head of the queue)", file=sys.stderr)
            return EXIT_USAGE
        out = _ask("jobs.move", {"id": a.id, "position": int(a.position)})
    elif action == "reply":
        text = _reply_text(a.position)
        if text is None:
            print("owl: jobs reply needs the reply's text ('-' reads it from stdin)",
                  file=sys.stderr)
            return EXIT_USAGE
        out = _ask("jobs.reply", {"id": a.id, "text": text, "first": a.first})
    else:  # verify
        out = _ask("jobs.verify", {"id": a.id})
    if a.json:
        _print_json(out)
    else:
        print(out.get("message") or f"job {out['id']} is {out['state']}"
              + (f" at position {out['position']}" if out.get("position") else ""))
    return EXIT_OK


def _reply_text(arg: str | None) -> str | None:
    """The reply as given, or read from stdin for '-'."""
    if arg is None:
        return None
    if arg == "-":
        return sys.stdin.read()
    return arg


def _show_job(job: dict, as_json: bool) -> None:
    if as_json:
        _print_json(job)
        return
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
    _show_job_extra(job)
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
        if r.get("resumed") is not None or r.get("usage"):
            conv = {True: "carried the conversation on", False: "fresh conversation",
                    None: ""}[r.get("resumed")]
            print("    " + " · ".join(x for x in (conv, _usage_text(r.get("usage"))) if x))
        for c in r.get("checks") or []:
            print("    " + _check_line(c))
    if job.get("verification"):
        print(f"  verified: {job['verification']}")
    again = job.get("verify")
    if again:
        print(f"  checks run again ({again['ended_at']}): "
              + ("all passed" if again["passed"] else "not all passed"))
        for c in again["checks"]:
            print("    " + _check_line(c))


def _check_line(c: dict) -> str:
    """One check of a Run: pass/fail, name, exit code, duration, command."""
    mark = {"passed": "pass", "failed": "FAIL"}.get(c.get("outcome") or "", c.get("outcome"))
    code = f"exit {c['exit_code']}" if c.get("exit_code") is not None else "no exit code"
    took = f"{c['duration_s']:.1f} s" if c.get("duration_s") is not None else "?"
    return f"check {mark}  {c['name']}  ({code}, {took})  $ {c['run']}"


def cmd_simple(verb: str) -> Callable[[argparse.Namespace], int]:
    def run(a: argparse.Namespace) -> int:
        args = {"force": a.force} if verb == "stop" else {}
        out = _ask(verb, args)
        if getattr(a, "json", False):
            _print_json(out)
        elif isinstance(out, dict) and out.get("message"):
            print(out["message"])
        elif verb == "start" and isinstance(out, dict) and "run_id" in out:
            print(f"run {out['run_id']} of job {out['job_id']} started; input does not "
                  "freeze it")
        else:
            print(json.dumps(out))
        return EXIT_OK
    return run


def cmd_shift(a: argparse.Namespace) -> int:
    if a.action == "start":
        from owl.config import parse_duration

        try:
            length = parse_duration(a.for_)
        except ValueError as e:
            print(f"owl: --for: {e}", file=sys.stderr)
            return EXIT_USAGE
        out = _ask("shift.start", {"for_s": length, "until_empty": a.until_empty,
                                   "require_power": a.require_power, "replace": a.replace})
    elif a.action == "stop":
        out = _ask("shift.stop")
    else:
        out = _ask("shift.status")
        if a.json:
            _print_json(out)
        elif out is None:
            print("no Shift")
        elif out.get("ended"):
            print(out["text"])
        else:
            print(f"Shift on · {_fmt_secs(out['left_s'])} left (until {out['ends_at']})"
                  + (" · until the queue is empty" if out["until_empty"] else "")
                  + (" · needs AC power" if out["require_power"] else "")
                  + (" · held by pause" if out["held"] else ""))
        return EXIT_OK
    if a.json:
        _print_json(out)
    else:
        print(out["message"])
    return EXIT_OK


def cmd_machine(a: argparse.Namespace) -> int:
    _ask("machine", {"event": a.event})
    return EXIT_OK


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = _ask("status")
    except NoDaemon:
        return _status_offline(a)
    if a.json:
        _print_json(st)
        return EXIT_OK
    print(_status_text(st))
    return EXIT_OK


def _status_offline(a: argparse.Namespace) -> int:
    """No daemon: say what the database holds (read-only), then exit 3."""
    problem = None
    try:
        store = _local_store()
        counts = store.counts()
        paused = bool(store.setting("paused", False))
        open_runs = len(store.open_runs())
        head = store.jobs(("pending", "active"), limit=1)
    except StoreError as e:
        counts, paused, open_runs, head = {}, False, 0, []
        problem = str(e)
    queued = counts.get("pending", 0) + counts.get("active", 0)
    if a.json:
        _print_json({"daemon": False, "paused": paused, "queue_length": queued,
                     "jobs": counts, "open_runs": open_runs,
                     "head": head[0]["id"] if head else None, "problem": problem})
    else:
        parts = [f"{queued} job{'s' if queued != 1 else ''} queued"]
        parts += [f"{counts[s]} {s}" for s in ("review", "blocked", "exhausted") if counts.get(s)]
        if paused:
            parts.append("paused")
        print("no daemon is running · " + " · ".join(parts))
        if head:
            print(f"next     job {head[0]['id']} {head[0]['title']!r}")
        if open_runs:
            print(f"runs     {open_runs} Run{'s' if open_runs != 1 else ''} were live when the "
                  "daemon stopped; the next start records them interrupted")
        for line in _offline_limit_lines():
            print(line)
        if problem:
            print(f"database {problem}")
    print("owl: no Owl daemon is running (start it with: owl daemon)", file=sys.stderr)
    return EXIT_NO_DAEMON


def _status_text(st: dict) -> str:
    m = st["machine"]
    lines = []
    if m["idle"]:
        machine = f"idle for {_fmt_secs(m['idle_for_s'])}"
    else:
        machine = m["reason"] or "in use"
        if m.get("idle_in_s") is not None and m["reason"] == "in use":
            machine += f" (idle in {_fmt_secs(m['idle_in_s'])})"
    power = {True: "on AC", False: "on battery", None: "power unknown"}[m["on_ac_power"]]
    det = ", ".join(m["detectors"]) or "none"
    lines.append(f"machine  {machine} · {power} · detectors: {det}")
    lines.append(f"paused   {'yes (owl resume lets work go on)' if st['paused'] else 'no'}")
    sh = st.get("shift")
    if sh and sh.get("ended"):
        lines.append(f"shift    {sh['text']}")
    elif sh:
        lines.append(f"shift    on · {_fmt_secs(sh['left_s'])} left"
                     + (" · held by pause" if sh.get("held") else ""))
    aw = st.get("awake") or {}
    if aw.get("held"):
        lines.append(f"awake    held: the machine will not idle-sleep while "
                     f"{aw.get('why') or 'an agent is working'} ({aw.get('backend')})")
    elif aw.get("problem"):
        lines.append(f"awake    {aw['problem']}")
    elif aw.get("enabled") is False:
        lines.append("awake    off (power.keep_awake = false): the machine may sleep during a Run")
    elif st["runs"]:
        lines.append("awake    not held: no Run is working, the machine may sleep")
    lines += _limit_lines(st)
    if not st["runs"]:
        lines.append("runs     none live")
    for r in st["runs"]:
        state = r["state"]
        if state == "frozen":
            state = f"frozen by {r['frozen_by']} · {_clock(r['grace_left_s'])} left"
        lines.append(f"run {r['id']:<4} job {r['job_id']} · {state} · "
                     f"{_fmt_secs(r['running_for_s'])} · {r['title']}")
    n = st.get("queue_length", len(st["queue"]))
    pending = [q for q in st["queue"] if q["state"] == "pending"]
    if not n:
        lines.append("queue    empty")
    else:
        head = pending[0] if pending else None
        text = f"queue    {n} job{'s' if n != 1 else ''}"
        if head:
            text += f" · next: job {head['id']} {head['title']!r}"
            if st.get("waiting"):
                text += f" · waiting: {st['waiting']}"
        lines.append(text)
    for r in st.get("review") or []:
        lines.append(f"review   job {r['id']} on {r['branch']} · {r['title']}")
    if st.get("attention"):
        lines.append(f"note     {st['attention']}")
    if st.get("config_problem"):
        lines.append(f"config   {st['config_problem']}")
    return "\n".join(lines)


def cmd_logs(a: argparse.Namespace) -> int:
    from owl.logs import show

    return show(_paths(), a.run, follow=a.follow, raw=a.raw, as_json=a.json)


def cmd_config(a: argparse.Namespace) -> int:
    from owl import config as configmod

    paths = _paths()
    if a.action == "path":
        if a.json:
            _print_json({"path": str(paths.config), "exists": paths.config.exists()})
        else:
            print(paths.config)
        return EXIT_OK
    try:
        cfg = configmod.load(paths.config)
    except configmod.ConfigError as e:
        raise Refused(str(e)) from None
    if a.action == "check":
        if a.json:
            _print_json({"path": str(paths.config), "exists": paths.config.exists(), "ok": True})
        else:
            print(f"{paths.config}: ok" if paths.config.exists()
                  else f"{paths.config}: not there; defaults in force")
        return EXIT_OK
    doc = configmod.effective_document(cfg)
    if a.json:
        _print_json(doc)
    else:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(doc))
    return EXIT_OK


def cmd_autostart(a: argparse.Namespace) -> int:
    from owl import autostart

    if a.action == "on":
        print(f"Owl will start at login ({autostart.enable()})")
    elif a.action == "off":
        print(f"Owl will not start at login (removed {autostart.disable()})")
    else:
        on, path = autostart.status()
        if a.json:
            _print_json({"on": on, "path": str(path)})
        else:
            print(f"{'on' if on else 'off'} ({path})")
    return EXIT_OK


# ------------------------------------------------------------------ parser

def _verb(sub: Any, name: str, **kw: Any) -> argparse.ArgumentParser:
    """A verb whose own --help opens with what it does (argparse shows `help` only
    in the parent's list unless it is also the description)."""
    if kw.get("help") is not argparse.SUPPRESS:
        kw.setdefault("description", kw.get("help"))
    return sub.add_parser(name, **kw)


def _limit_lines(st: dict) -> list[str]:
    """One line per agent waiting out a usage limit (or its service's backoff)."""
    return [f"limit    {w['agent']} waits until {w['until'][11:16]}: {w['reason']}"
            for w in st.get("limits") or []]


def _offline_limit_lines() -> list[str]:
    """The usage-limit waits the database holds, for `owl status` with no daemon."""
    import sqlite3
    import time

    try:
        waits = [w for w in _local_store().limits() if w["until"] > time.time()]
    except (StoreError, sqlite3.Error):      # no database yet
        return []
    return [f"limit    {w['agent']} waits until {time.strftime('%H:%M', time.localtime(w['until']))}"
            f": {w['reason']}" for w in waits]


def _usage_text(u: dict | None) -> str:
    """A Run's (or a Job's) cost in one short phrase."""
    if not u:
        return ""
    bits = []
    if u.get("num_turns") is not None:
        bits.append(f"{u['num_turns']} turns")
    if u.get("duration_ms") is not None:
        bits.append(f"{u['duration_ms'] / 1000:.1f} s")
    tokens = [u.get(k) for k in ("input_tokens", "output_tokens")]
    if all(t is not None for t in tokens):
        bits.append(f"{tokens[0]:,} in / {tokens[1]:,} out tokens")
    cached = [u.get(k) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens")]
    if any(cached):
        bits.append(f"cache {cached[0]:,} read / {cached[1]:,} written")
    if u.get("total_cost_usd") is not None:
        bits.append(f"${u['total_cost_usd']:.4f}")
    return ", ".join(bits)


def _show_job_extra(job: dict) -> None:
    """What carried the Job on: the wait it is in, its replies, what it cost."""
    if job.get("limit"):
        print(f"  waiting:  {job['limit']['reason']}")
    for r in job.get("replies") or []:
        given = f" (given to run {r['run_id']})" if r.get("run_id") else " (for the next Run)"
        print(f"  reply     [{r['at']}]{given}: {' '.join(r['text'].split())[:200]}")
    if job.get("usage"):
        print(f"  cost:     {_usage_text(job['usage'])} over all Runs")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="owl", description="Owl runs coding agents while you are away from the "
                "machine, and gives it back the moment you return.")
    p.add_argument("--version", action="version", version=f"owl {__version__}")
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)

    s = _verb(sub, "tray", help="the tray icon, with the daemon in the same process "
                       "(what plain `owl` runs)")
    s.set_defaults(fn=cmd_tray)
    s = _verb(sub, "daemon", help="run the daemon in the foreground, without a tray")
    s.set_defaults(fn=cmd_daemon)

    s = _verb(sub, "add", help="queue a Job: a prompt for an agent, in a project (git repo)",
                       description="Queue a Job. It runs in a git worktree and branch of its own "
                       "when the machine is idle. Prints the new Job's id.")
    s.add_argument("prompt", help="what the agent should do ('-' reads it from stdin)")
    s.add_argument("--project", help="the git repository to work in (default: here)")
    s.add_argument("--agent", help="an agent from config (default: agent.default)")
    s.add_argument("--attempts", type=int, help="how many failed Runs before the Job is "
                   "exhausted (default: jobs.attempts)")
    s.add_argument("--json", action="store_true", help="print the Job as `jobs show --json`")
    s.set_defaults(fn=cmd_add)

    s = _verb(sub, "jobs", help="list, show, drop, accept, extend, move or verify Jobs",
                       description="list: the Jobs; show ID: one Job with every Run; drop ID: "
                       "cancel it and remove its worktree and branch; accept ID: keep the "
                       "branch of a Job in review and remove its worktree; extend ID: give an "
                       "exhausted or blocked Job more attempts, in the place it kept; move ID "
                       "POS: reorder the queue (1 is the head); verify ID: run its checks again; reply ID "
                       "TEXT: send a Job in review, blocked or exhausted back to the queue with "
                       "your words as its next Run's message.")
    s.add_argument("action", nargs="?", choices=["list", "show", "drop", "accept", "extend",
                                                  "move", "verify", "reply"])
    s.add_argument("id", nargs="?", type=int)
    s.add_argument("position", nargs="?", metavar="POS|TEXT",
                   help="move: the new position; reply: what to tell the agent ('-': stdin)")
    s.add_argument("--first", action="store_true",
                   help="reply: put the Job at the head of the queue")
    s.add_argument("--all", action="store_true", help="list: include done and cancelled Jobs")
    s.add_argument("--force", action="store_true",
                   help="drop: end a live Run and discard uncommitted changes")
    s.add_argument("--attempts", type=int, help="extend: how many more attempts (default 1)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_jobs)

    for verb, text in (
        ("start", "start one Run now, for the head of the queue, even though the machine is "
                  "in use; input does not freeze a Run started this way"),
        ("pause", "freeze every live Run and hold: nothing new starts until `owl resume`; a "
                  "paused Run still ends when its grace window passes"),
        ("resume", "lift the hold: Runs you paused go on (or wait, frozen, for the machine "
                   "to be idle again)"),
    ):
        s = _verb(sub, verb, help=text, description=text)
        s.add_argument("--json", action="store_true")
        s.set_defaults(fn=cmd_simple(verb))
    s = _verb(sub, "stop", help="end this work: freeze the live Runs and end them when "
                       "the grace window passes (--force: now); queued Jobs stay queued",
                       description="End the live Runs (this work, not work in general): they "
                       "are frozen and asked to stop when the grace window passes, or at once "
                       "with --force; an agent still there 5 s later is killed. Their Jobs go "
                       "back to the queue in their place. During a Shift it stops this work, "
                       "not the Shift: `owl shift stop` ends that.")
    s.add_argument("--force", action="store_true", help="end them now")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_simple("stop"))

    s = _verb(sub, "shift", help="work while you are here: start, stop, or status of a "
                       "Shift", description="A Shift is a bounded time in which Runs start and "
                       "are not frozen although the machine is in use. Caps still apply; power "
                       "is ignored unless --require-power. Starting one while one is on extends "
                       "it to the later end (unless --replace). When it ends, its Runs are let "
                       "finish. `owl pause` holds a Shift; its clock keeps running.")
    s.add_argument("action", choices=["start", "stop", "status"])
    s.add_argument("--for", dest="for_", default="1h", help="how long (default 1h)")
    s.add_argument("--until-empty", action="store_true", help="end early once the queue is empty")
    s.add_argument("--require-power", action="store_true", help="freeze and start nothing on battery")
    s.add_argument("--replace", action="store_true", help="replace the current Shift instead of "
                   "extending it")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_shift)

    s = _verb(sub, "status", help="the machine, the hold, live Runs and the queue, at a glance")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_status)

    s = _verb(sub, "logs", help="print a Run's log (claude's stream-json as readable lines)")
    s.add_argument("run", type=int, help="the Run's id (see `owl jobs show ID`)")
    s.add_argument("-f", "--follow", action="store_true", help="keep printing until the Run ends")
    s.add_argument("--raw", action="store_true", help="print the log as written")
    s.add_argument("--json", action="store_true",
                   help="one JSON object a line: {\"run\": ID, \"line\": TEXT}")
    s.set_defaults(fn=cmd_logs)

    s = _verb(sub, "config", help="path: where the config is; show: the config in force; "
                       "check: check it")
    s.add_argument("action", choices=["path", "show", "check"])
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_config)

    s = _verb(sub, "autostart", help="start Owl at login: on, off, or status")
    s.add_argument("action", choices=["on", "off", "status"])
    s.add_argument("--json", action="store_true", help="status: {\"on\": ..., \"path\": ...}")
    s.set_defaults(fn=cmd_autostart)

    s = _verb(sub, "machine", help=argparse.SUPPRESS)
    s.add_argument("event", choices=["input", "idle", "battery", "ac", "power-unknown"])
    s.set_defaults(fn=cmd_machine)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verb is None:
        args.fn = cmd_tray
    try:
        return args.fn(args)
    except Refused as e:
        print(f"owl: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except NoDaemon as e:
        print(f"owl: {e}", file=sys.stderr)
        return EXIT_NO_DAEMON
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the daemon said something unreadable, and the like
        from owl.control.client import DaemonError

        if isinstance(e, DaemonError):
            print(f"owl: {e}", file=sys.stderr)
            return e.exit_code
        raise
