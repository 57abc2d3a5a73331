"""`owl status`: the machine, the hold, live Runs and the queue, at a glance."""

from __future__ import annotations

import argparse
import sys
import time

from owl import textsafe
from owl.cli.common import (
    EXIT_NO_DAEMON,
    EXIT_OK,
    ask,
    json_flag,
    local_store,
    offline,
    print_json,
    verb,
)
from owl.errors import NoDaemon, Refused, StoreError, Unreachable

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def register(sub: Any) -> None:
    s = verb(sub, "status", help="the machine, the hold, live Runs and the queue, at a glance")
    json_flag(s)
    s.add_argument(
        "--since-away",
        action="store_true",
        help="only the summary of the last away spell (the briefing), or of this "
        "one while you are away",
    )
    s.set_defaults(fn=cmd_status)


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = ask("status")
    except NoDaemon as nobody:
        return _status_offline(a, nobody)
    if getattr(a, "since_away", False):
        return _since_away(a, st)
    if a.json:
        print_json(st)
        return EXIT_OK
    print(_status_text(textsafe.view(st)))
    return EXIT_OK


def _since_away(a: argparse.Namespace, st: dict) -> int:
    """`owl status --since-away`: what happened in the last away spell (or this one)."""
    spell = (st.get("notify") or {}).get("since_away")
    if a.json:
        print_json(spell or {"text": "", "happened": False})
    elif not spell:
        print("you have not been away since the daemon started")
    elif not spell.get("happened"):
        print(
            "nothing happened while you were away"
            if spell.get("back_at")
            else "nothing has happened since you left"
        )
    else:
        print(textsafe.line(spell["text"]))
    return EXIT_OK


def _sandbox_lines(st: dict) -> list[str]:
    """Whether Runs are contained, in the first lines: where they cannot be (not
    the person's "off"), `owl status` leads with why and what fixes it."""
    sb = st.get("sandbox") or {}
    if not sb:
        return []
    if sb.get("contained"):
        return [
            _line("sandbox", "Runs are contained (bubblewrap; owl jobs show says how each was)")
        ]
    if sb.get("mode") == "off":
        return [_line("sandbox", 'off: Runs are not contained (sandbox.mode = "off")')]
    return [_line("sandbox", sb.get("line") or f"Runs are not contained: {sb.get('problem')}")]


def _reach(label: str) -> str:
    """What a live Run's line adds about its containment: only what differs
    from "contained, own network, no unix sockets" (the sandbox line above
    says that)."""
    if label.startswith("not"):
        return " · not contained"
    if ", no network: " in label:  # its network helper failed: it has none
        why = label.split(", no network: ", 1)[1].split("; unix sockets: ", 1)[0]
        return " · no network: " + why + _sockets_words(label)
    return _network_words(label) + _sockets_words(label)


def _network_words(label: str) -> str:
    for said in (", no network", ", network: allow-list"):
        if said in label:
            return " · " + said[2:] + label.split(said, 1)[1].split(";", 1)[0]
    return ""


def _sockets_words(label: str) -> str:
    """The unix sockets ``sandbox.sockets`` opened to the Run, when it did."""
    opened = label.split("; unix sockets: ", 1)[1:]
    words = opened[0].split(";", 1)[0] if opened else "none"
    return "" if words == "none" else f" · unix sockets: {words}"


def _login_path_lines(lp: dict | None) -> list[str]:
    """The login shell's PATH could not be read: what was tried, why, what it printed."""
    if not lp:
        return []
    said = " | ".join(ln.strip() for ln in textsafe.lines(lp.get("said") or "") if ln.strip())
    out = [
        _line(
            "PATH",
            f"the login shell's could not be read ({lp.get('why')}), so agents are looked up "
            f"on {lp.get('path') or 'none'}; tried: {lp.get('tried')}",
        )
    ]
    if said:
        out.append(_line("", f"it printed: {said[-300:]}"))
    return out


def _notify_lines(st: dict) -> list[str]:
    """The channels (masked) and each one's last send; the reply channel."""
    n = st.get("notify") or {}
    out = []
    for ch in n.get("channels") or []:
        last = ch.get("last")
        said = (
            "nothing sent yet"
            if last is None
            else (
                f"last send {'ok' if last['ok'] else 'failed'} "
                f"{time.strftime('%H:%M', time.localtime(last['at']))}: {last['title']}"
                + ("" if last["ok"] else f" ({last['answer']})")
            )
        )
        if ch.get("problem"):
            said = f"cannot be used: {ch['problem']} · " + said
        if ch.get("retry_at"):
            said += (
                f" · trying again at {time.strftime('%H:%M:%S', time.localtime(ch['retry_at']))}"
            )
        out.append(_line("channel", f"{ch['url']} · {said}"))
    reply = n.get("reply")
    if reply:
        state = (
            "listening"
            if reply.get("connected")
            else f"not connected ({reply.get('problem') or 'connecting'})"
        )
        out.append(_line("replies", f"{reply['url']} · {state}"))
    brief = n.get("briefing")
    if brief and brief.get("text"):
        out.append(_line("away", brief["text"]))
    return out


def _status_offline(a: argparse.Namespace, nobody: NoDaemon) -> int:
    """No daemon answers: say what the database holds (read-only), then exit 3.
    `nobody` says why (none runs, or one holds the home and does not answer)."""
    from owl.cli.carry import offline_limit_facts
    from owl.rules.jobtable import QUEUED

    problem = None
    try:
        store = offline(local_store)
        counts, paused, open_runs, head = offline(
            lambda: (
                store.counts(),
                bool(store.setting("paused", False)),
                len(store.open_runs()),
                store.jobs(QUEUED, limit=1),
            )
        )
    except Refused as e:  # damaged: that one line is all the database can say
        print(f"owl: {textsafe.line(str(e))}", file=sys.stderr)
        if a.json:
            print_json({"error": str(e), "exit": EXIT_NO_DAEMON})
        return EXIT_NO_DAEMON
    except StoreError as e:
        counts, paused, open_runs, head = {}, False, 0, []
        problem = str(e)
    queued = counts.get("pending", 0) + counts.get("active", 0)
    if a.json:
        print_json(
            {
                "daemon": False,
                "paused": paused,
                "queue_length": queued,
                "jobs": counts,
                "open_runs": open_runs,
                "head": head[0]["id"] if head else None,
                "problem": problem,
                **({"unreachable": str(nobody)} if isinstance(nobody, Unreachable) else {}),
            }
        )
    else:
        parts = [f"{queued} job{'s' if queued != 1 else ''} queued"]
        parts += [f"{counts[s]} {s}" for s in ("review", "blocked", "exhausted") if counts.get(s)]
        if paused:
            parts.append("paused")
        said = (
            "the daemon does not answer"
            if isinstance(nobody, Unreachable)
            else "no daemon is running"
        )
        print(f"{said} · " + " · ".join(parts))
        if head:
            print(_line("next", f"job {head[0]['id']} {textsafe.line(head[0]['title'])!r}"))
        if open_runs:
            print(
                _line(
                    "runs",
                    f"{open_runs} Run{'s' if open_runs != 1 else ''} were live when "
                    "the daemon stopped; the next start records them interrupted",
                )
            )
        for fact in offline_limit_facts():
            print(_line(*fact))
        if problem:
            print(_line("database", problem))
    print(f"owl: {nobody}", file=sys.stderr)
    return EXIT_NO_DAEMON


LABEL = 12  # "keep-awake: " is the longest label


def _line(label: str, text: str) -> str:
    return f"{label + ':':<{LABEL}}{text}"


def _status_text(st: dict) -> str:
    """One screen of facts: each line a fact, none contradicting another.
    (What only the text needs is imported here: `--json` goes without.)"""
    from owl.cli.carry import limit_facts
    from owl.rules.capwords import is_cap_stop
    from owl.rules.timefmt import countdown, duration

    sh = st.get("shift")
    shift_on = isinstance(sh, dict) and not sh.get("ended")
    sandbox = _sandbox_lines(st)
    off = (st.get("sandbox") or {}).get("mode") == "off"
    lines = [_line("permission", p) for p in [st["machine"].get("permission")] if p]
    lines += _login_path_lines(st.get("login_path"))
    lines += [
        *([] if off else sandbox),  # first: whether Runs are contained here
        _line("machine", _machine(st["machine"], shift_on)),
        _line("paused", "yes (owl resume lets work go on)" if st["paused"] else "no"),
    ]
    if sh and sh.get("ended"):
        lines.append(_line("shift", sh["text"]))
    elif sh:
        lines.append(
            _line(
                "shift",
                f"on · {duration(sh['left_s'], coarse=True)} left · Runs start and are "
                "not frozen although the machine is in use"
                + (" · spending past the headroom kept" if sh.get("spend") else "")
                + (" · held by pause" if sh.get("held") else ""),
            )
        )
    awake = _awake(st.get("awake") or {}, bool(st["runs"]))
    if awake:
        lines.append(_line("keep-awake", awake))
    early = (st.get("awake") or {}).get("sleeps_first")
    if early:
        lines.append(_line("sleep", early["text"]))
    lines += [_line(*f) for f in limit_facts(st)]
    if not st["runs"]:
        lines.append(_line("runs", "none live"))
    for r in st["runs"]:
        state = r["state"]
        worked = f"worked {duration(r['running_for_s'])}"
        if state == "frozen":
            state = (
                f"frozen by {r['frozen_by']} · {countdown(r['grace_left_s'])} of its grace "
                "window left"
            )
        elif state == "freezing":
            n = len(r.get("not_stopped") or [])
            state = (
                f"NOT frozen: {n} process{'' if n == 1 else 'es'} still running, Owl keeps "
                f"trying · {countdown(r['grace_left_s'])} of its grace window left"
            )
        bare = _reach(r.get("contained") or "")
        lines.append(
            _line(
                f"run {r['id']}",
                f"job {r['job_id']} · {state}{bare} · {worked} · {r['title']} · owl logs "
                f"{r['job_id']} -f",
            )
        )
        if r.get("stopped"):
            lines.append(" " * LABEL + r["stopped"])
        lines += _untouchable_lines(r.get("untouchable"))
        lines += _not_stopped_lines(r.get("not_stopped"))
    for r in st.get("recent") or []:
        if is_cap_stop(r.get("reason")):
            lines.append(_line(f"run {r['run_id']}", f"job {r['job_id']} · {r['reason']}"))
        if r.get("untouchable"):
            lines.append(
                _line(f"run {r['run_id']}", f"job {r['job_id']} · ended, but left running:")
            )
            lines += _untouchable_lines(r["untouchable"])
    lines.append(_line("queue", _queue(st)))
    lines += _needs_you(st)
    lines += _notify_lines(st)
    lines += sandbox if off else []
    note = st.get("attention")
    said = ("the machine cannot be read", st["machine"].get("permission") or "\0")
    if note and not note.startswith(said) and note != (st.get("sandbox") or {}).get("line"):
        # (the machine's, the permission's and the sandbox's own lines say those)
        lines.append(_line("note", note))
    if st.get("config_problem"):
        lines.append(_line("config", st["config_problem"]))
    return "\n".join(lines)


def _machine(m: dict, shift_on: bool) -> str:
    from owl.rules.timefmt import duration

    power = {True: "on AC", False: "on battery", None: "power unknown"}[m["on_ac_power"]]
    if m["idle"]:
        text = f"idle for {duration(m['idle_for_s'])} · {power}"
    else:
        reason = m["reason"] or "in use"
        text = reason
        if shift_on and reason.startswith("input cannot be read"):
            text += " (a Shift is on: not needed)"
        elif reason.startswith("input cannot be read"):
            text += " (nothing starts on idle; owl shift start works)"
        elif m.get("idle_in_s") is not None and reason == "in use" and not shift_on:
            text += f" (idle in {duration(m['idle_in_s'])})"
        if reason not in ("on battery", "power unknown"):
            text += f" · {power}"
    if m.get("screen_locked"):
        text = f"screen locked · {text}"
    det = ", ".join(m["detectors"]) or "none"
    if m.get("missing"):
        det += f" (missing: {m['missing']}, keys only through the idle time)"
    return f"{text} · detectors: {det}"


def short_awake_problem(problem: str) -> str:
    """keep-awake's trouble in a few words: the full text is in the log and --json."""
    low = problem.lower()
    if "d-bus system bus" in low or "system d-bus" in low:
        return "unavailable (no system D-Bus)"
    if "d-bus session bus" in low:
        return "unavailable (no D-Bus session bus)"
    head = problem.split(" (")[0].split(";")[0].strip()
    return f"unavailable ({head[:60]})"


def _awake(aw: dict, any_runs: bool) -> str | None:
    if aw.get("held"):
        return f"held while {aw.get('why') or 'an agent is working'} ({aw.get('backend')})"
    if aw.get("problem"):
        return short_awake_problem(aw["problem"])
    if aw.get("enabled") is False:
        return "off (power.keep_awake = false): the machine may sleep during a Run"
    if any_runs:
        return "not held: no Run is working, the machine may sleep"
    return None


def _queue(st: dict) -> str:
    """What waits for a Run; the Jobs working now are the runs' lines."""
    n = st.get("queue_length", len(st["queue"]))
    pending = st.get("queue_pending", n)
    if not n:
        return "empty"
    working = n - pending
    if not pending:
        return f"nothing waiting ({working} job{'s' if working != 1 else ''} working)"
    head = next((q for q in st["queue"] if q["state"] == "pending"), None)
    text = f"{pending} job{'s' if pending != 1 else ''} waiting"
    if head:
        text += f" · next: job {head['id']} {head['title']!r}"
        waiting = st.get("waiting")
        said = (st.get("sandbox") or {}).get("line")
        if waiting and said and waiting.endswith(said):
            waiting = waiting.removesuffix(said) + "Runs cannot be contained (see above)"
        if waiting:
            text += f" · waiting: {waiting}"
    return text


SHOWN = 5  # Jobs listed per kind; `owl jobs` has the rest


def _needs_you(st: dict) -> list[str]:
    """The Jobs that wait for the person, each with the command that helps."""
    out = []
    review = st.get("review") or []
    for r in review[:SHOWN]:
        out.append(
            _line(
                "review",
                f"job {r['id']} · {r['title']} · on {r['branch']} · "
                f"owl jobs review {r['id']}, then owl jobs accept {r['id']}",
            )
        )
    stuck = st.get("stuck") or []
    for j in stuck[:SHOWN]:
        why = f" · {j['reason']}" if j.get("reason") else ""
        helps = (
            f"owl jobs extend {j['id']}"
            if j["state"] == "exhausted"
            else f"owl jobs show {j['id']}, then owl jobs extend {j['id']}"
        )
        out.append(_line(j["state"], f"job {j['id']} · {j['title']}{why} · {helps}"))
    more = max(0, len(review) - SHOWN) + max(0, len(stuck) - SHOWN)
    if more:
        out.append(_line("", f"and {more} more: owl jobs"))
    return out


def _not_stopped_lines(procs: list[dict] | None, most: int = 5) -> list[str]:
    """The first few processes a freeze left running, and how many more."""
    procs = procs or []
    out = [
        f"{'':<{LABEL}}still running: pid {p['pid']} ({p['command']}): {p['why']}"
        for p in procs[:most]
    ]
    if len(procs) > most:
        out.append(f"{'':<{LABEL}}and {len(procs) - most} more")
    return out


def _untouchable_lines(procs: list[dict] | None) -> list[str]:
    """One line per process of a Run that Owl may not signal (and so left alone)."""
    return [
        f"{'':<{LABEL}}left alone: pid {p['pid']} ({p['command']}): {p['why']}" for p in procs or []
    ]
