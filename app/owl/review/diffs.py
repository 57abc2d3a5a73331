"""A unified diff as files, hunks and lines, each line's code coloured by Pygments.

Pure: diff text in, data out. Each side of a hunk (the old lines and the new)
is lexed as one piece of code in the file's own language, so a line inside a
multi-line string is coloured as a string, and then the two sides are woven
back in the diff's order. Files too long to colour are shown plain.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

HIGHLIGHT_MAX_LINES = 4000  # per file: beyond this, plain text is quicker to read anyway
HUNK_LINES_MAX = 2000  # lines kept of one hunk: the rest are counted, not shown

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


@dataclass
class Line:
    kind: str  # "+", "-", " ", or "\\" (no newline at end of file)
    old: int | None
    new: int | None
    text: str
    tokens: list[tuple[str, str]] = field(default_factory=list)  # (css class, text)


@dataclass
class Hunk:
    header: str
    lines: list[Line] = field(default_factory=list)
    more: int = 0  # lines past HUNK_LINES_MAX, counted but not kept


@dataclass
class FileDiff:
    path: str
    old_path: str | None = None
    status: str = "modified"  # added, deleted, modified, renamed, binary
    hunks: list[Hunk] = field(default_factory=list)
    added: int = 0
    removed: int = 0


def unquote(path: str) -> str:
    """A path as git prints it in a diff header ("a/x", or C-quoted when odd)."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        raw = path[1:-1].encode("latin-1", "backslashreplace")
        try:
            path = raw.decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
        except (UnicodeDecodeError, UnicodeEncodeError):
            path = path[1:-1]
    return path


def _strip_prefix(path: str) -> str | None:
    path = unquote(path.strip())
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _hunk_start(line: str) -> tuple[int, int] | None:
    """The first old and new line numbers a hunk header (`@@ -a,b +c,d @@`) names,
    or None when the line is not one (then it is passed over, not guessed at)."""
    m = _HUNK.match(line)
    return (int(m.group(1)), int(m.group(3))) if m else None


def parse(text: str, hunk_lines: int = HUNK_LINES_MAX) -> list[FileDiff]:
    """The files of a `git diff` (no colour, no renames) in order, each hunk's
    lines kept up to `hunk_lines` (a generated file's one hunk of 100,000 lines
    would otherwise be a page of tens of MB)."""
    files: list[FileDiff] = []
    cur: FileDiff | None = None
    hunk: Hunk | None = None
    old_no = new_no = 0
    for raw in text.split("\n"):
        if raw.startswith("diff --git "):
            m = re.match(r'diff --git ("?a/.*?"?) ("?b/.*"?)$', raw)
            path = _strip_prefix(m.group(2)) if m else raw[len("diff --git ") :]
            cur, hunk = FileDiff(path=path or "?"), None
            files.append(cur)
            continue
        if cur is None:
            continue
        if raw.startswith("@@"):  # a hunk begins, after the file's header or another hunk
            start = _hunk_start(raw)
            if start is not None:
                old_no, new_no = start
                hunk = Hunk(header=raw)
                cur.hunks.append(hunk)
            continue
        if hunk is None or raw[:1] not in ("+", "-", " ", "\\"):
            if raw.startswith("new file mode"):
                cur.status = "added"
            elif raw.startswith("deleted file mode"):
                cur.status = "deleted"
            elif raw.startswith("Binary files ") or raw.startswith("GIT binary patch"):
                cur.status = "binary"
            elif raw.startswith("--- ") and hunk is None:
                old = _strip_prefix(raw[4:])
                if old and old != cur.path:
                    cur.old_path = old
            elif raw.startswith("+++ ") and hunk is None:
                new = _strip_prefix(raw[4:])
                if new:
                    cur.path = new
            continue
        kind, body = raw[:1], raw[1:]
        if len(hunk.lines) >= hunk_lines:
            hunk.more += 1
            cur.added += kind == "+"
            cur.removed += kind == "-"
            continue
        if kind == "+":
            hunk.lines.append(Line("+", None, new_no, body))
            new_no += 1
            cur.added += 1
        elif kind == "-":
            hunk.lines.append(Line("-", old_no, None, body))
            old_no += 1
            cur.removed += 1
        elif kind == " ":
            hunk.lines.append(Line(" ", old_no, new_no, body))
            old_no += 1
            new_no += 1
        else:
            hunk.lines.append(Line("\\", None, None, body.strip()))
    return files


def _token_class(ttype: object) -> str:
    from pygments.token import STANDARD_TYPES

    t = ttype
    while t not in STANDARD_TYPES and getattr(t, "parent", None) is not None:
        t = t.parent  # type: ignore[attr-defined]
    return STANDARD_TYPES.get(t, "")


def _lex_lines(lexer: object, lines: list[str]) -> list[list[tuple[str, str]]]:
    """Each of `lines` as (css class, text) tokens, lexed together as one file."""
    if not lines:
        return []
    out: list[list[tuple[str, str]]] = [[]]
    for ttype, value in lexer.get_tokens("\n".join(lines) + "\n"):  # type: ignore[attr-defined]
        cls = _token_class(ttype)
        if cls in ("w", "x"):  # whitespace and plain text need no span
            cls = ""
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                out.append([])
            if not part:
                continue
            line = out[-1]
            if line and line[-1][0] == cls:  # one span for a run of one kind
                line[-1] = (cls, line[-1][1] + part)
            else:
                line.append((cls, part))
    return out[: len(lines)] + [[] for _ in range(len(lines) - len(out))]


def lexer_for(path: str) -> object | None:
    """The Pygments lexer for a file name, or None for plain text."""
    name = path.rsplit("/", 1)[-1]
    suffix = name.rsplit(".", 1)[-1] if "." in name else name
    return _lexer_for(suffix if "." in name else name, name)


@functools.lru_cache(maxsize=256)
def _lexer_for(key: str, name: str) -> object | None:
    # Finding a lexer scans every lexer's patterns (~6 ms): once per kind of file.
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False, stripall=False)
    except ClassNotFound:
        return None


def code_size(f: FileDiff) -> int:
    """How much code colouring this file means lexing (both sides of its hunks)."""
    return sum(len(ln.text) + 1 for h in f.hunks for ln in h.lines)


def plain(f: FileDiff) -> None:
    for h in f.hunks:
        for ln in h.lines:
            ln.tokens = [("", ln.text)]


def highlight(f: FileDiff) -> None:
    """Fill every line's tokens, colouring each side of each hunk in the file's language."""
    lexer = lexer_for(f.path)
    count = sum(len(h.lines) for h in f.hunks)
    for h in f.hunks:
        if lexer is None or count > HIGHLIGHT_MAX_LINES:
            for ln in h.lines:
                ln.tokens = [("", ln.text)]
            continue
        old = [ln for ln in h.lines if ln.kind in (" ", "-")]
        new = [ln for ln in h.lines if ln.kind in (" ", "+")]
        for side, toks in (
            (old, _lex_lines(lexer, [ln.text for ln in old])),
            (new, _lex_lines(lexer, [ln.text for ln in new])),
        ):
            for ln, t in zip(side, toks):
                if ln.kind != " " or side is new:
                    ln.tokens = t
        for ln in h.lines:
            if ln.kind == "\\":
                ln.tokens = [("", ln.text)]


def css(style: str = "default") -> str:
    """The Pygments colour rules for tokens inside `.code`."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style=style).get_style_defs(".code")
