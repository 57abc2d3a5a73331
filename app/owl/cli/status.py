"""`owl status`: the machine, the hold, live Runs and the queue, at a glance."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from owl.cli.carry import limit_lines, offline_limit_lines
from owl.cli.common import EXIT_NO_DAEMON, EXIT_OK, ask, json_flag, local_store, print_json, verb
from owl.errors import NoDaemon, StoreError
from owl.timefmt import countdown, duration


def register(sub: Any) -> None:
    s = verb(sub, "status", help="the machine, the hold, live Runs and the queue, at a glance")
    json_flag(s)
    s.set_defaults(fn=cmd_status)


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = ask("status")
    except NoDaemon:
        return _status_offline(a)
    if a.json:
        print_json(st)
        return EXIT_OK
    print(_status_text(st))
    return EXIT_OK


def _status_offline(a: argparse.Namespace) -> int:
    """No daemon: say what the database holds (read-only), then exit 3."""
    problem = None
    try:
        store = local_store()
        counts = store.counts()
        paused = bool(store.setting("paused", False))
        open_runs = len(store.open_runs())
        head = store.jobs(("pending", "active"), limit=1)
    except StoreError as e:
        counts, paused, open_runs, head = {}, False, 0, []
        problem = str(e)
    queued = counts.get("pending", 0) + counts.get("active", 0)
    if a.json:
        print_json({"daemon": False, "paused": paused, "queue_length": queued,
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
        for line in offline_limit_lines():
            print(line)
        if problem:
            print(f"database {problem}")
    print("owl: no Owl daemon is running (start it with: owl daemon)", file=sys.stderr)
    return EXIT_NO_DAEMON


def _status_text(st: dict) -> str:
    m = st["machine"]
    lines = []
    if m["idle"]:
        machine = f"idle for {duration(m['idle_for_s'])}"
    else:
        machine = m["reason"] or "in use"
        if m.get("idle_in_s") is not None and m["reason"] == "in use":
            machine += f" (idle in {duration(m['idle_in_s'])})"
    power = {True: "on AC", False: "on battery", None: "power unknown"}[m["on_ac_power"]]
    det = ", ".join(m["detectors"]) or "none"
    lines.append(f"machine  {machine} · {power} · detectors: {det}")
    lines.append(f"paused   {'yes (owl resume lets work go on)' if st['paused'] else 'no'}")
    sh = st.get("shift")
    if sh and sh.get("ended"):
        lines.append(f"shift    {sh['text']}")
    elif sh:
        lines.append(f"shift    on · {duration(sh['left_s'])} left"
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
    lines += limit_lines(st)
    if not st["runs"]:
        lines.append("runs     none live")
    for r in st["runs"]:
        state = r["state"]
        if state == "frozen":
            state = f"frozen by {r['frozen_by']} · {countdown(r['grace_left_s'])} left"
        lines.append(f"run {r['id']:<4} job {r['job_id']} · {state} · "
                     f"{duration(r['running_for_s'])} · {r['title']}")
        lines += _untouchable_lines(r.get("untouchable"))
    for r in st.get("recent") or []:
        if r.get("untouchable"):
            lines.append(f"run {r['run_id']:<4} job {r['job_id']} · ended, but left running:")
            lines += _untouchable_lines(r["untouchable"])
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


def _untouchable_lines(procs: list[dict] | None) -> list[str]:
    """One line per process of a Run that Owl may not signal (and so left alone)."""
    return [f"         left alone: pid {p['pid']} ({p['command']}): {p['why']}"
            for p in procs or []]
