"""What carried a Job on, in words: usage-limit waits, replies, resumed
conversations and what Runs cost; and `owl jobs reply`."""

from __future__ import annotations

import argparse
import sys
import time

from owl.cli.common import EXIT_OK, ask, id_number, json_flag, local_store, print_json, verb
from owl.errors import StoreError

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def register_reply(acts: Any) -> None:
    s = verb(
        acts,
        "reply",
        help="send a Job in review, blocked or exhausted back to the queue "
        "with your words as its next Run's message",
        description="Send a Job in review, blocked or exhausted back to the queue (its old "
        "place, or the head with --first; at least one attempt) with your words as its "
        "next Run's message, in the same conversation where the agent can carry one on.",
    )
    s.add_argument("id", type=id_number, metavar="ID", help="the Job's id")
    s.add_argument(
        "text", nargs="+", metavar="TEXT", help="what to tell the agent ('-' reads it from stdin)"
    )
    s.add_argument("--first", action="store_true", help="put the Job at the head of the queue")
    json_flag(s)
    s.set_defaults(fn=cmd_reply)


def cmd_reply(a: argparse.Namespace) -> int:
    text = sys.stdin.read() if a.text == ["-"] else " ".join(a.text)
    out = ask("jobs.reply", {"id": a.id, "text": text, "first": a.first})
    if a.json:
        print_json(out)
    else:
        print(out.get("message") or f"job {out['id']} is {out['state']}")
    return EXIT_OK


def limit_facts(st: dict) -> list[tuple[str, str]]:
    """One `owl status` (label, text) per agent waiting out a usage limit (or its
    service); a moment past six days carries its date and year."""
    from owl.rules.timefmt import ahead

    now = time.time()
    waits = st.get("limits") or []
    return (
        [
            (
                "limit",
                w["reason"]
                if str(w.get("kind") or "").startswith("budget:")
                else f"{w['agent']} waits until "
                f"{w.get('until_text') or ahead(w.get('until_epoch'), now)}: {w['reason']}",
            )
            for w in waits
        ]
        + budget_facts(st.get("budget"))
        + agents_fact(
            [
                (w["agent"], w["until_epoch"])
                for w in waits
                if isinstance(w.get("until_epoch"), (int, float))
            ]
        )
    )


def budget_facts(b: dict | None) -> list[tuple[str, str]]:
    """`budget: today $1.84 of $5.00 · 12,345 tokens`, and the day's hold when
    the money is spent."""
    if not isinstance(b, dict):
        return []
    today, caps = b.get("today") or {}, b.get("caps") or {}
    usd, tokens = today.get("usd") or 0.0, today.get("tokens") or 0
    capped = caps.get("daily_usd") is not None or caps.get("daily_tokens") is not None
    if not (usd or tokens or capped or b.get("held") or b.get("spend")):
        return []  # nothing spent today, and nothing to spend against
    said = f"today ${usd:.2f}"
    if caps.get("daily_usd") is not None:
        said += f" of ${caps['daily_usd']:.2f}"
    said += _not_billed(usd, today.get("api_equivalent_usd") or 0.0)
    said += f" · {tokens:,} tokens"
    if caps.get("daily_tokens") is not None:
        said += f" of {caps['daily_tokens']:,}"
    if b.get("spend"):
        said += " · the Shift spends past the headroom kept"
    out = [("budget", said)]
    held = b.get("held")
    if isinstance(held, dict):
        out.append(
            ("budget", f"no Run starts before {held.get('until_text')}: {held.get('reason')}")
        )
    return out


def agents_fact(
    waits: list[tuple[str, float]], known: list[str] | None = None, now: float | None = None
) -> list[tuple[str, str]]:
    """`agents: claude waits until 08:10 · codex ready`, while any agent waits:
    each waiting agent, then each other agent Jobs may go to (`known`, by
    default `known_agents()`: the config is read only while an agent waits)."""
    if not waits:
        return []
    if known is None:
        known = known_agents()
    from owl.rules.timefmt import ahead

    now = time.time() if now is None else now  # its day said when not today, as the limit's line
    said = [f"{a} waits until {ahead(u, now)}" for a, u in waits]
    held = {a for a, _ in waits}
    said += [f"{a} ready" for a in known if a not in held]
    return [("agents", " · ".join(said))]


def known_agents() -> list[str]:
    """The agents Jobs go to: the default, the fallback, and every configured one."""
    from owl.settings import config as configmod
    from owl.cli.common import paths

    try:
        cfg = configmod.load(paths().config)
    except (configmod.ConfigError, OSError):
        return []
    out: list[str] = []
    for a in [cfg.default_agent, *(cfg.fallback or []), *cfg.agents]:
        if a not in out:
            out.append(a)
    return out


def offline_limit_facts() -> list[tuple[str, str]]:
    """The waits the database holds, for `owl status` with no daemon."""
    import sqlite3

    from owl.rules.timefmt import ahead

    now = time.time()
    try:
        waits = [w for w in local_store().limits() if w["until"] > now]
    except (StoreError, sqlite3.Error):
        return []
    return [
        (
            "limit",
            w["reason"]
            if str(w.get("kind") or "").startswith("budget:")
            else f"{w['agent']} waits until {ahead(w['until'], now)}: {w['reason']}",
        )
        for w in waits
    ] + agents_fact([(w["agent"], w["until"]) for w in waits])


def _not_billed(usd: float, unbilled: float) -> str:
    """', API-equivalent, not billed' when a subscription's figure (or part of it) is no bill."""
    from owl.rules import money

    p = money.part(usd, unbilled)
    return f", {p}" if p else ""


def usage_text(u: dict | None) -> str:
    """A Run's (or a Job's) cost in one short phrase."""
    if not u:
        return ""
    bits = []
    if u.get("num_turns") is not None:
        bits.append(f"{u['num_turns']} turn{'s' if u['num_turns'] != 1 else ''}")
    if u.get("duration_ms") is not None:
        from owl.rules.timefmt import duration

        bits.append(duration(u["duration_ms"] / 1000))
    tokens = [u.get(k) for k in ("input_tokens", "output_tokens")]
    if all(t is not None for t in tokens):
        bits.append(f"{tokens[0]:,} in / {tokens[1]:,} out tokens")
    cached = [u.get(k) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens")]
    if any(cached):
        bits.append(f"cache {cached[0]:,} read / {cached[1]:,} written")
    if u.get("total_cost_usd") is not None:
        from owl.rules import money

        bits.append(money.said(u["total_cost_usd"], money.billed_of(u), digits=4))
    return ", ".join(bits)


def job_lines(job: dict) -> list[str]:
    """The wait a Job is in, its replies, and what all its Runs cost."""
    from owl.rules.timefmt import moment, parse_iso

    out, now = [], time.time()
    if job.get("limit"):
        out.append(f"  waiting:  {job['limit']['reason']}")
    for r in job.get("replies") or []:
        given = f" (given to run {r['run_id']})" if r.get("run_id") else " (for the next Run)"
        out.append(
            f"  reply     {moment(parse_iso(r['at']), now)}{given}: "
            f"{' '.join(r['text'].split())[:200]}"
        )
    if job.get("usage"):
        out.append(f"  cost:     {usage_text(job['usage'])} over all Runs")
    return out


def run_line(r: dict) -> str | None:
    """Whether a Run carried the conversation on, and what it cost."""
    resumed = r.get("resumed")
    conv = (
        {True: "carried the conversation on", False: "fresh conversation"}[resumed]
        if isinstance(resumed, bool)
        else None
    )
    text = " · ".join(x for x in (conv, usage_text(r.get("usage"))) if x)
    return "    " + text if text else None
