"""`owl agents`: every agent Owl can start, at a glance.

    owl agents [list] [--json]

One line per agent, built-in (claude, codex, gemini, opencode, copilot, pi, aider) or configured
(`[agents.NAME]`): whether its CLI is found (and where), its version, whether
it waits out a usage limit (and until when), and its Runs and cost today.
Read from the config, the database (read-only) and the agents' package
files, so it works with no daemon and runs nothing: a built-in CLI's version
is read from its package (`owl.agents.version`), and a configured command
runs only as a Run, never to be asked its version. Each action is a subparser of its own (`register_list`), so more
verbs on agents sit beside it:

    owl agents wake NAME

ends an agent's usage-limit wait now. A wait comes from the agent's own words
(a reset moment, or a backoff when it gave none); the person may know better
(a plan upgraded, a limit raised), so this ends it: the agent's Jobs may start
at once, and its backoff starts over.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import time
from datetime import datetime
from typing import Any

from owl import textsafe
from owl.cli.common import (
    EXIT_OK,
    ask,
    json_flag,
    local_store,
    offline,
    paths,
    print_json,
    verb,
    with_actions,
)
from owl.errors import Refused, StoreError
from owl.rules import money


def register(sub: Any) -> None:
    acts = with_actions(
        sub,
        "agents",
        help="the agents Owl can start: found, version, waiting, Runs and cost today",
        description="The agents Owl can start. `owl agents` alone lists them.",
        dest="agents_action",
    )
    register_list(acts)
    register_wake(acts)


def register_list(acts: Any) -> None:
    s = verb(
        acts,
        "list",
        help="each built-in and configured agent: found or not, version, "
        "whether it waits and until when, its Runs and cost today",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_list)


def register_wake(acts: Any) -> None:
    w = verb(acts, "wake", help="end an agent's usage-limit wait now: its Jobs may start at once")
    w.add_argument(
        "name",
        metavar="NAME",
        help="the agent (a built-in one such as claude or opencode, or a name from [agents.NAME])",
    )
    json_flag(w)
    w.set_defaults(fn=cmd_wake)


def cmd_wake(a: argparse.Namespace) -> int:
    out = ask("agents.wake", {"name": a.name})
    if a.json:
        print_json(out)
    else:
        print(textsafe.block(out["message"]))
    return EXIT_OK


def cmd_list(a: argparse.Namespace) -> int:
    rows = agent_facts()
    if a.json:
        print_json({"agents": rows})
        return EXIT_OK
    for r in rows:
        print(textsafe.line(row_text(r)))
    return EXIT_OK


def row_text(r: dict[str, Any]) -> str:
    """`codex  found /usr/bin/codex (0.171.0) · waits until 08:10 · 2 Runs today`."""
    where = f"found {r['path']}" if r["found"] else f"not found: {r['problem']}"
    if r["found"] and r["version"]:
        where += f" ({r['version']})"
    state = f"waits until {r['until'][11:16]}: {r['reason']}" if r["waits"] else "ready"
    runs = f"{r['runs_today']} Run{'s' if r['runs_today'] != 1 else ''} today"
    if r["cost_today_usd"] is not None:
        runs += ", " + money.said_total(r["cost_today_usd"], r.get("api_equivalent_today_usd") or 0)
    if r["tokens_today"]:
        runs += f", {r['tokens_today']:,} tokens"
    default = " (default)" if r["default"] else ""
    return f"{r['name']}{default}: {where} · {state} · {runs}"


def agent_facts(now: float | None = None) -> list[dict[str, Any]]:
    """One dict per agent (see the module docstring)."""
    from owl import agents
    from owl.settings import config as configmod

    now = time.time() if now is None else now
    try:
        cfg = configmod.load(paths().config)
    except (configmod.ConfigError, OSError):
        cfg = configmod.Config()
    names = list(agents.BUILT_IN) + [n for n in cfg.agents if n not in agents.BUILT_IN]
    waits, today = _store_facts(now)
    found = {n: _where(n, cfg.agent(n)) for n in names}
    versions = {n: _version(n, cfg.agent(n), found[n][0]) for n in names}
    rows = []
    for n in names:
        path, problem = found[n]
        w = waits.get(n)
        mine = [u for a, u in today if a == n]
        costly = [u for u in mine if u and isinstance(u.get("total_cost_usd"), (int, float))]
        costs = [u["total_cost_usd"] for u in costly]
        unbilled = sum(u["total_cost_usd"] for u in costly if money.billed_of(u) is False)
        tokens = sum(
            int(u.get(k) or 0)
            for u in mine
            if u
            for k in ("input_tokens", "output_tokens")
            if isinstance(u.get(k), (int, float))
        )
        rows.append(
            {
                "name": n,
                "built_in": n in agents.BUILT_IN and not cfg.agent(n).get("command"),
                "configured": n in cfg.agents,
                "default": n == cfg.default_agent,
                "fallback": n in (cfg.fallback or []),
                "found": path is not None,
                "path": path,
                "problem": problem,
                "version": versions.get(n),
                "waits": w is not None,
                "kind": w["kind"] if w else None,
                "until": _iso(w["until"]) if w else None,
                "until_epoch": round(w["until"], 3) if w else None,
                "reason": w["reason"] if w else None,
                "runs_today": len(mine),
                "tokens_today": tokens,
                "cost_today_usd": round(sum(costs), 6) if costs else None,
                "api_equivalent_today_usd": round(unbilled, 6) if costs else None,
            }
        )
    return rows


def _where(name: str, cfg: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the executable's full path, None) or (None, why it is not found)."""
    from owl import agents

    try:
        driver = agents.get_driver(name, cfg)
    except ValueError as e:
        return None, str(e)
    exe = cfg["command"][0] if cfg.get("command") else (cfg.get("path") or name)
    path = shutil.which(exe) if "{" not in exe else None
    if path is None:
        return None, driver.problem() or f"{exe} is decided per Run"
    return os.path.realpath(path) if os.sep in exe else path, None


def _version(name: str, cfg: dict[str, Any], path: str | None) -> str | None:
    """A built-in CLI's version from its package's files; a command agent's is
    not known (its command runs only as a Run)."""
    from owl.agents import version

    return None if cfg.get("command") else version.installed(name, path)


def _store_facts(now: float) -> tuple[dict[str, dict], list[tuple[str, dict | None]]]:
    """The waits in force, and today's Runs (agent, usage), from the database."""
    midnight = (
        datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    )
    try:
        store = offline(local_store)
        waits = {w["agent"]: w for w in store.limits() if w["until"] > now}
        runs = [(r["agent"], r["usage"]) for r in store.runs_since(midnight)]
    except (StoreError, Refused, OSError, sqlite3.Error):  # no database yet: nothing ran
        return {}, []
    return waits, runs


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))
