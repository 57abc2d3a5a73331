"""The review page's Runs: each one's outcome (in the one word every view
uses), how it ended, what it took and cost, and its log.

Pure, like the page: a Job's facts in, HTML out."""

from __future__ import annotations

from typing import Any

from owl.review.prose import esc, file_url, took, when
from owl.rules.lifecycle import shown_run_outcome
from owl.rules import money

_ENDED = {"exit": "exited", "sigterm": "stopped (SIGTERM)", "sigkill": "killed (SIGKILL)"}


def _usage(u: dict[str, Any] | None) -> str:
    if not u:
        return '<span class="empty">—</span>'
    bits = []
    if u.get("num_turns") is not None:
        bits.append(f"{int(u['num_turns'])} turns")
    tokens_in = sum(
        int(u.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    if tokens_in or u.get("output_tokens"):
        bits.append(f"{tokens_in:,} in / {int(u.get('output_tokens') or 0):,} out tokens")
    if u.get("total_cost_usd") is not None:
        bits.append(money.said(float(u["total_cost_usd"]), money.billed_of(u), digits=4))
    if u.get("duration_ms") is not None:
        bits.append(f"agent {took(float(u['duration_ms']) / 1000)}")
    return (
        f'<span class="usage">{esc(" · ".join(bits))}</span>'
        if bits
        else '<span class="empty">—</span>'
    )


def outcome_badge(r: dict[str, Any]) -> str:
    word = shown_run_outcome(r)
    cls = {"succeeded": "ok", "failed": "bad", "killed": "bad", "interrupted": "warn"}.get(
        word, "mute"
    )
    return f'<span class="badge {cls}">{esc(word)}</span>'


def runs_section(f: dict[str, Any]) -> str:
    rows = [
        "<tr><th>Run</th><th>Outcome</th><th>How it ended</th><th>Took</th><th>Usage</th>"
        "<th>Log</th></tr>"
    ]
    for r in f["runs"]:
        how = ended_how(r)
        why = f'<div class="cbody">{esc(r["reason"])}</div>' if r.get("reason") else ""
        if (r.get("contained") or "").startswith("not contained"):
            why += f'<div class="cbody warn">{esc(r["contained"])}</div>'  # said on every view
        log = file_url(r.get("log"))
        by = f"{esc(r['agent'])} · " if r.get("agent") else ""
        rows.append(
            f'<tr><td>#{int(r["id"])} <span class="when">{by}{_attempt(r)} · '
            f"{esc(when(r.get('started_at')))}</span></td>"
            f'<td class="outcome">{outcome_badge(r)}</td><td>{esc(how)}{why}</td>'
            f'<td class="num">{esc(took(r.get("duration_s")))}</td><td>{_usage(r.get("usage"))}</td>'
            f"<td>{_log_link(log, r['id'])}</td></tr>"
        )
    if len(rows) == 1:
        return '<section class="card"><h2>Runs</h2><div class="body empty">No runs yet.</div></section>'
    return f'<section class="card runs" id="runs"><h2>Runs</h2><table class="list">{"".join(rows)}</table></section>'


def _attempt(r: dict[str, Any]) -> str:
    """As every other label counts it: a Run that cost nothing is no attempt."""
    return "no attempt" if r.get("attempt") is None else f"attempt {int(r['attempt'])}"


def ended_how(r: dict[str, Any]) -> str:
    """How a Run ended, in words: exited 0, stopped (SIGTERM) · exit 143, still going."""
    if not r.get("ended_at"):
        return "still going"
    word = _ENDED.get(r.get("ended_by") or "", r.get("ended_by") or "")
    code = r.get("exit_code")
    if code is None:
        return word
    if word == "exited":
        return f"exited {code}"
    return f"{word} · exit {code}" if word else f"exit {code}"


def _log_link(url: str | None, run_id: int) -> str:
    return f'<a href="{esc(url)}">{int(run_id)}.log</a>' if url else ""
