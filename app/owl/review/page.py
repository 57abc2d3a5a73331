"""The review page: one self-contained HTML file from a Job's facts.

Pure: facts in (`owl.review.facts.gather`), a string out. Everything it needs
is inline: the style sheet, the Pygments colours, an emoji for a logo. No
script, no style sheet, font or image from anywhere, so the page reads the
same offline and cannot call home. Links point only at local files (the
logs, the worktree) and at anchors in the page.

Every string that came from an agent or a repository is HTML-escaped after
its control characters are made visible (`owl.review.text.visible`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from owl.review import diffs
from owl.review.prose import logo, esc, file_url, heading, prose, took, when
from owl.review.changes import size_words
from owl.review.diff_html import HIGHLIGHT_BUDGET, diff_section, total_files
from owl.review.runs_html import runs_section
from owl.rules import money

OUTPUT_TAIL_LINES = 40
COMMITS_SHOWN = 20  # more are behind a click
FILES_SHOWN = 40
CODE_STYLE = "default"  # Pygments style: reads well on the light green and red of a diff
CODE_STYLE_DARK = "github-dark"  # and on the dark ones, when the desktop asks for dark


def _style() -> str:
    sheet = resources.files("owl.review").joinpath("style.css").read_text(encoding="utf-8")
    dark = diffs.css(CODE_STYLE_DARK).replace("\n", "\n  ")
    return (
        sheet
        + "\n"
        + diffs.css(CODE_STYLE)
        + "\n@media (prefers-color-scheme: dark) {\n  "
        + dark
        + "\n}\n"
        + ".diff.code { background: transparent; }\n"
    )


# ---------------------------------------------------------------- sections


def _header(f: dict[str, Any]) -> str:
    j = f["job"]
    state = esc(j["state"])
    bits = [
        f"<span>Job {int(j['id'])}</span>",
        f'<span title="{esc(j["project"])}"><b>{esc(Path(j["project"]).name)}</b></span>',
    ]
    if j.get("branch"):
        onto = f" → <code>{esc(j['base_branch'])}</code>" if j.get("base_branch") else ""
        bits.append(f"<span><code>{esc(j['branch'])}</code>{onto}</span>")
    bits.append(f"<span>agent {esc(j['agent'])}</span>")
    bits.append(f"<span>queued {esc(when(j.get('created_at')))}</span>")
    return (
        f'<header class="top">{logo()}<div class="head">'
        f'<h1>{esc(heading(j))}<span class="pill {state}">{state}</span></h1>'
        f'<div class="meta">{"".join(bits)}</div></div>{_next(j)}</header>'
    )


def _next(j: dict[str, Any]) -> str:
    """The one command a person coming back most likely wants, in the corner."""
    if j.get("state") != "review":
        return ""
    onto = f"into {esc(j['base_branch'])}" if j.get("base_branch") else "into its base branch"
    return (
        f'<div class="next"><span>Looks right? Bring it {onto}:</span>'
        f"<code>owl jobs accept {int(j['id'])} --merge</code></div>"
    )


def _checks_summary(f: dict[str, Any]) -> tuple[str, str]:
    """(value, css class) for the checks tile: the latest checks that ran."""
    latest: list[dict[str, Any]] = f["verify"] or next(
        (r["checks"] for r in reversed(f["runs"]) if r["checks"]), []
    )
    if not latest:
        return "none", "none"
    passed = sum(1 for c in latest if c["passed"])
    return f"{passed}/{len(latest)}", "ok" if passed == len(latest) else "bad"


def _lines(f: dict[str, Any]) -> tuple[int, int]:
    """Lines added and removed over every file (the listing names only the first)."""
    if f.get("lines") and f.get("files_total"):
        added, removed = f["lines"]
        return int(added), int(removed)
    return sum(x["added"] or 0 for x in f["files"]), sum(x["removed"] or 0 for x in f["files"])


def _lines_of(f: dict[str, Any]) -> str:
    """What the lines tile counts: every file, or the listed ones of many."""
    listed = f.get("lines_of")
    return f"lines in the first {listed:,} files" if listed else "lines"


def _stats(f: dict[str, Any]) -> str:
    added, removed = _lines(f)
    count = total_files(f)
    value, cls = _checks_summary(f)
    runs = f["runs"]
    tiles = [
        (
            "",
            f"<b>{len(f['commits'])}</b><span>{'commit' if len(f['commits']) == 1 else 'commits'}</span>",
        ),
        (
            "",
            f"<b>{count:,}</b><span>{'file' if count == 1 else 'files'} changed</span>",
        ),
        (
            "",
            f'<b><span class="plus">+{added:,}</span> <span class="minus">−{removed:,}</span></b>'
            f"<span>{_lines_of(f)}</span>",
        ),
        (cls, f"<b>{value}</b><span>checks passed</span>"),
        (
            "",
            f"<b>{len(runs)}</b><span>{'run' if len(runs) == 1 else 'runs'} · "
            f"{esc(took(sum(r['duration_s'] or 0 for r in runs)))}{_cost(runs)}</span>",
        ),
    ]
    return (
        '<div class="stats">'
        + "".join(f'<div class="stat {c}">{body}</div>' for c, body in tiles)
        + "</div>"
    )


def _cost(runs: list[dict[str, Any]]) -> str:
    """' · $1.84', or on a subscription ' · $1.84 (API-equivalent, not billed)'."""
    usages = [r.get("usage") or {} for r in runs]
    costs = [float(u.get("total_cost_usd") or 0) for u in usages]
    total = sum(costs)
    if not any(costs):
        return ""
    unbilled = sum(c for c, u in zip(costs, usages) if money.billed_of(u) is False)
    return " · " + money.said_total(total, unbilled, 2 if total >= 0.005 else 4)


def _said(f: dict[str, Any]) -> str:
    msg = f.get("last_message")
    body = prose(msg) if msg else '<span class="empty">The agent left no message.</span>'
    return f'<section class="card said"><h2>What the agent says</h2><div class="body">{body}</div></section>'


def _prompt(f: dict[str, Any]) -> str:
    replies = f.get("replies") or []
    said = "".join(
        f'<div class="reply"><span class="when">you, {esc(when(r.get("at")))}'
        + (f" · given to run {int(r['run_id'])}" if r.get("run_id") else " · for the next run")
        + f"</span><div>{prose(r.get('text') or '')}</div></div>"
        for r in replies
    )
    n = len(replies)
    summary = "The prompt" + (f" and your {n} {'reply' if n == 1 else 'replies'}" if n else "")
    return (
        f'<section class="card"><details class="prompt-box"{" open" if replies else ""}>'
        f"<summary>{esc(summary)}</summary>"
        f'<div class="body"><pre class="prompt">{esc(f["job"]["prompt"])}</pre>{said}</div>'
        "</details></section>"
    )


def _commits(f: dict[str, Any]) -> str:
    rows = []
    for c in f["commits"]:
        body = f'<div class="cbody">{esc(c["body"])}</div>' if c.get("body") else ""
        rows.append(
            f'<tr><td class="hash">{esc(c["short"])}</td>'
            f'<td><div class="subject">{esc(c["subject"])}</div>{body}</td>'
            f'<td class="when">{esc(c["author"])} · {esc(when(c["at"]))}</td></tr>'
        )
    inner = (
        _fold(rows, COMMITS_SHOWN, "commit")
        if rows
        else '<div class="body empty">No commits on the branch.</div>'
    )
    return (
        f'<section class="card" id="commits"><h2>Commits <small>{len(rows)}</small></h2>'
        f"{inner}</section>"
    )


def _bar(added: int | None, removed: int | None, widest: int) -> str:
    a, d = added or 0, removed or 0
    if not widest or not (a or d):
        return '<span class="bar"></span>'
    scale = 70 / max(widest, 1)
    return (
        f'<span class="bar"><i class="a" style="width:{max(1, round(a * scale)) if a else 0}px"></i>'
        f'<i class="d" style="width:{max(1, round(d * scale)) if d else 0}px"></i></span>'
    )


def _fold(rows: list[str], shown: int, what: str) -> str:
    """A table of `rows`, the first `shown` open and the rest behind a click."""
    table = f'<table class="list">{"".join(rows[:shown])}</table>'
    rest = rows[shown:]
    if not rest:
        return table
    return (
        f'{table}<details class="more"><summary>{len(rest):,} more {what}s</summary>'
        f'<table class="list">{"".join(rest)}</table></details>'
    )


def _files(f: dict[str, Any], shown: dict[str, int]) -> str:
    widest = max(((x["added"] or 0) + (x["removed"] or 0) for x in f["files"]), default=0)
    rows = []
    for x in f["files"]:
        name = esc(x["path"])
        link = f'<a href="#file-{shown[x["path"]]}">{name}</a>' if x["path"] in shown else name
        counts = _counts(x)
        rows.append(
            f'<tr><td class="path">{link}</td><td class="num">{counts}</td>'
            f'<td class="num">{_bar(x["added"], x["removed"], widest)}</td></tr>'
        )
    inner = (
        _fold(rows, FILES_SHOWN, "file")
        if rows
        else '<div class="body empty">No files changed.</div>'
    )
    total = total_files(f)
    if total > len(rows):
        inner += (
            f'<div class="note">… and {total - len(rows):,} more files, not listed here: '
            f"<code>owl jobs diff {int(f['job']['id'])}</code> prints them.</div>"
        )
    return (
        f'<section class="card" id="files"><h2>Files changed <small>{total:,}</small></h2>'
        f"{inner}</section>"
    )


def _counts(x: dict[str, Any]) -> str:
    """A listed file's line counts, or why it has none."""
    if x.get("big"):
        return f'<span class="mute">{esc(size_words(x["size"]))}, not shown</span>'
    if x["added"] is None:
        return '<span class="mute">binary</span>'
    return f'<span class="plus">+{x["added"]}</span> <span class="minus">−{x["removed"]}</span>'


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    parts = (text or "").rstrip("\n").split("\n")
    if len(parts) <= lines:
        return "\n".join(parts)
    return f"… {len(parts) - lines} lines above\n" + "\n".join(parts[-lines:])


def _check_rows(checks: Iterable[dict[str, Any]]) -> str:
    out = []
    for c in checks:
        badge = (
            '<span class="badge ok">passed</span>'
            if c["passed"]
            else f'<span class="badge bad">{esc(c.get("outcome") or "failed")}</span>'
        )
        code = f"exit {c['exit_code']}" if c.get("exit_code") is not None else "no exit code"
        output = c.get("output") or ""
        pre = (
            f'<pre class="out">{esc(_tail(output))}</pre>'
            if output.strip()
            else '<pre class="out">(no output)</pre>'
        )
        log = file_url(c.get("log"))
        loglink = f' · <a href="{esc(log)}">log</a>' if log else ""
        out.append(
            f'<details class="check"{"" if c["passed"] else " open"}><summary>{badge}'
            f'<b>{esc(c["name"])}</b><span class="cmd">$ {esc(c["run"])}</span>'
            f'<span class="took">{esc(code)} · {esc(took(c.get("duration_s")))}{loglink}</span>'
            f"</summary>{pre}</details>"
        )
    return "".join(out)


def _source(checks: list[dict[str, Any]], base: str | None) -> str:
    """Which .owl.toml declared the checks shown, as HTML."""
    source = next((c.get("source") for c in checks if c.get("source")), None)
    if not source:
        return "the checks of <code>.owl.toml</code> on the base branch"
    why = " (the commit the Job started from)" if base and source == base else ""
    return f"the checks of <code>.owl.toml</code> at <code>{esc(source[:7])}</code>{why}"


def _checks(f: dict[str, Any]) -> str:
    parts = []
    base = f["job"].get("base")
    if f["verify"]:
        parts.append(
            '<div class="note">Run again on demand (<code>owl jobs verify</code>), '
            f"{_source(f['verify'], base)}:</div>"
        )
        parts.append(_check_rows(f["verify"]))
    last = next((r for r in reversed(f["runs"]) if r["checks"]), None)
    if last is not None:
        parts.append(
            f'<div class="note">After run {int(last["id"])}, gated by '
            f"{_source(last['checks'], base)}:</div>"
        )
        parts.append(_check_rows(last["checks"]))
    if not parts:
        parts.append(
            '<div class="body empty">Not verified: the project declares no checks '
            "(<code>[[checks]]</code> in <code>.owl.toml</code> on its base branch).</div>"
        )
    return f'<section class="card" id="checks"><h2>Checks</h2>{"".join(parts)}</section>'


def _outside(f: dict[str, Any]) -> str:
    items = [x for r in f["runs"] for x in r.get("outside") or []]
    if not items:
        return ""
    lis = "".join(f"<li>{esc(x if isinstance(x, str) else _describe(x))}</li>" for x in items)
    return (
        '<section class="card" id="outside"><h2>Changed outside the branch</h2>'
        f'<div class="note">The agent changed these outside its worktree and branch: look at '
        f'them before you accept.</div><div class="body"><ul class="outside">{lis}</ul></div></section>'
    )


def _describe(x: Any) -> str:
    """One change outside the branch in words (`moved main from … to …`)."""
    if isinstance(x, dict):
        from owl.git.outsidewords import describe

        try:
            return describe(x)
        except (TypeError, ValueError, AttributeError):
            return " · ".join(f"{k}: {v}" for k, v in x.items())
    return str(x)


def esc_ref(base: str) -> str:
    """A branch name for a command line, or a stand-in for one."""
    return base if base and " " not in base else "main"


def _act(f: dict[str, Any]) -> str:
    j = f["job"]
    jid = int(j["id"])
    links = []
    wt = file_url(j.get("worktree"))
    if wt and j.get("worktree") and Path(j["worktree"]).is_dir():
        links.append(f'<a href="{esc(wt)}">Open the worktree</a>')
    logs = [(r["id"], file_url(r.get("log"))) for r in f["runs"] if r.get("log")]
    links += [f'<a href="{esc(u)}">Log of run {int(i)}</a>' for i, u in logs if u]
    base = j.get("base_branch") or "its base branch"
    cmds = [
        (
            f"owl jobs accept {jid} --merge",
            f"bring the branch into {base}, then remove the worktree",
        ),
        (f"owl jobs accept {jid}", "keep the branch as it is, remove the worktree"),
        (f"owl jobs reply {jid} TEXT", "send it back to the agent with your words"),
        (f"owl jobs verify {jid}", "run the checks again"),
        (f"owl jobs drop {jid}", "throw the work away"),
    ]
    if j.get("state") in ("blocked", "exhausted"):
        cmds[:2] = [
            (
                f"owl jobs verify {jid} --checks-from {esc_ref(base)}",
                "run the checks as they are now on its base branch",
            ),
            (f"owl jobs accept {jid} --anyway", "keep the branch past its failing checks"),
        ]
    rows = "".join(f"<code>{esc(c)}</code><span>{esc(w)}</span>" for c, w in cmds)
    return (
        f'<section class="card" id="act"><h2>Act on it</h2><div class="body">'
        f'<div class="links">{"".join(links)}</div>'
        f'<div class="cmds" style="margin-top:12px">{rows}</div></div></section>'
    )


def render(f: dict[str, Any]) -> str:
    """The whole page for a Job's facts."""
    parsed = diffs.parse(f.get("diff") or "")
    budget = HIGHLIGHT_BUDGET
    for fd in parsed:
        size = diffs.code_size(fd)
        if size <= budget:
            diffs.highlight(fd)
            budget -= size
        else:
            diffs.plain(fd)
            budget = -1
    f = dict(f, colour_cut=budget < 0)
    shown = {fd.path: i for i, fd in enumerate(parsed)}
    from owl import __version__

    title = f"Job {int(f['job']['id'])}: {f['job']['title']}"
    body = "".join(
        [
            _header(f),
            _stats(f),
            _said(f),
            _outside(f),
            _checks(f),
            _commits(f),
            _files(f, shown),
            diff_section(f, parsed),
            runs_section(f),
            _prompt(f),
            _act(f),
            f"<footer>Written by Owl {esc(__version__)} at {esc(when(f.get('generated_at')))} · "
            "this page loads nothing from the network</footer>",
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_style()}</style></head>"
        f'<body><div class="wrap">{body}</div></body></html>\n'
    )
