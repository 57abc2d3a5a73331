"""The review page's diff: every file's hunks as a table, coloured by Pygments
within a budget, and the notes that say what the page leaves out.

Pure, like the page: a Job's facts and the parsed diff in, HTML out."""

from __future__ import annotations

from typing import Any

from owl.git.workspace import BIG_BLOB
from owl.review import diffs
from owl.review.changes import size_words
from owl.review.prose import esc

# Pygments lexes about 100 KB of code a second here: past this much, plain text,
# so a large Job's page is written in a few seconds.
HIGHLIGHT_BUDGET = 250_000


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def total_files(f: dict[str, Any]) -> int:
    """Every file the branch changes (the listing names only the first of many)."""
    return max(int(f.get("files_total") or 0), len(f["files"]))


def _line_html(ln: diffs.Line) -> str:
    toks = ln.tokens or [("", ln.text)]
    return "".join(f'<span class="{c}">{esc(t)}</span>' if c else esc(t) for c, t in toks)


_ROW = {"+": "add", "-": "del", " ": "ctx"}


def _more_lines(h: diffs.Hunk, jid: int) -> str:
    if not h.more:
        return ""
    return (
        f'<tr class="hunk"><td colspan="4">… {plural(h.more, "more line")} in this hunk: '
        f"<code>owl jobs diff {jid}</code> prints them</td></tr>"
    )


def _file_diff(i: int, fd: diffs.FileDiff, jid: int) -> str:
    tag = "" if fd.status == "modified" else f'<span class="tag">{esc(fd.status)}</span>'
    head = (
        f'<h3 id="file-{i}"><span class="path">{esc(fd.path)}</span>{tag}'
        f'<span class="plus">+{fd.added}</span><span class="minus">−{fd.removed}</span></h3>'
    )
    if fd.status == "binary" or not fd.hunks:
        what = (
            "Binary file, not shown."
            if fd.status == "binary"
            else "No text changes (mode or empty file)."
        )
        return f'<div class="file">{head}<div class="body empty">{what}</div></div>'
    rows = []
    for h in fd.hunks:
        rows.append(f'<tr class="hunk"><td colspan="4">{esc(h.header)}</td></tr>')
        for ln in h.lines:
            if ln.kind == "\\":
                rows.append(
                    f'<tr class="eof"><td class="d-num"></td><td class="d-num"></td><td class="d-mark"></td>'
                    f'<td class="d-src">{esc(ln.text)}</td></tr>'
                )
                continue
            old = "" if ln.old is None else str(ln.old)
            new = "" if ln.new is None else str(ln.new)
            mark = {"+": "+", "-": "−"}.get(ln.kind, "")
            rows.append(
                f'<tr class="{_ROW[ln.kind]}"><td class="d-num">{old}</td><td class="d-num">{new}</td>'
                f'<td class="d-mark">{mark}</td><td class="d-src">{_line_html(ln)}</td></tr>'
            )
        rows.append(_more_lines(h, jid))
    return (
        f'<div class="file">{head}<table class="diff code"><colgroup><col class="d-num"><col class="d-num">'
        f'<col class="d-mark"><col></colgroup>{"".join(rows)}</table></div>'
    )


def diff_section(f: dict[str, Any], parsed: list[diffs.FileDiff]) -> str:
    jid = int(f["job"]["id"])
    notes = []
    if f["diff_cut"]:
        over = "more than " if f.get("diff_more") else ""
        notes.append(
            f'<div class="note">The diff is {over}{f["diff_chars"] / 1e6:.1f} MB over '
            f"{plural(total_files(f), 'file')}; this page shows the first "
            f"{plural(len(parsed), 'file')}. <code>owl jobs diff {jid}</code> prints all of it.</div>"
        )
    big = [x for x in f["files"] if x.get("big")]
    if big:
        names = ", ".join(
            f"<code>{esc(x['path'])}</code> ({esc(size_words(x['size']))})" for x in big[:10]
        ) + (f" and {len(big) - 10:,} more" if len(big) > 10 else "")
        notes.append(
            f'<div class="note">Not shown, each over {esc(size_words(BIG_BLOB))} '
            f"(summarised by size, never read): {names}.</div>"
        )
    if f.get("colour_cut"):
        notes.append(
            '<div class="note">Colour stops after the first '
            f"{HIGHLIGHT_BUDGET // 1000} KB of code; the rest is shown plain.</div>"
        )
    dirty = f.get("worktree_dirty") or []
    if dirty:
        names = ", ".join(f"<code>{esc(n)}</code>" for n in dirty[:5]) + (
            " …" if len(dirty) > 5 else ""
        )
        notes.append(
            f'<div class="note">Not committed in the worktree, so not on the branch and '
            f"not shown here: {names}</div>"
        )
    if f.get("git_problem"):
        notes.append(f'<div class="note">{esc(f["git_problem"])}</div>')
    body = "".join(_file_diff(i, fd, jid) for i, fd in enumerate(parsed))
    if not parsed and not f.get("git_problem"):
        body = '<div class="body empty">The branch changes nothing.</div>'
    base = esc((f["job"].get("base") or "")[:10])
    return (
        f'<section class="card" id="diff"><h2>Diff <small>against {base}</small></h2>'
        f"{''.join(notes)}{body}</section>"
    )
