"""Text from an agent or a repository, made safe to show a person.

An agent writes whatever it likes into its output, its commit subjects and its
check output. Shown raw, an escape sequence clears the terminal or retitles the
window, a `\\r` rewrites the line before it ("verified: 3 checks passed"), and a
bidi override reorders what is read. So everything Owl shows that it did not
write itself goes through here: control characters become visible escapes
(`\\x1b`, `\\r`, `\\u202e`) and invalid UTF-8 becomes U+FFFD. What is shown then
is what the bytes mean, and nothing in them can act on the terminal.

Pure functions, no I/O: `line` for one-line places (labels, titles, menu
items, subjects), `block` where several lines are meant (a log, check output),
which keeps newlines and tabs and nothing else.
"""

from __future__ import annotations


# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

# Named escapes read better than hex for the ones people know.
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0"}

# Characters that are not C0/C1 controls but still change how text reads or
# where it goes: bidi embeddings, overrides and isolates (Trojan Source),
# zero-width characters that hide text inside a word, and the Unicode line and
# paragraph separators some terminals and widgets break on.
_INVISIBLE_ACTORS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u2028\u2029\ufeff"
    "\u200b\u200c\u200d\u2060"
)

REPLACEMENT = "\ufffd"


def _unsafe(ch: str, keep: str) -> bool:
    """Whether `ch` must be escaped; `keep` names the controls that stay."""
    if ch in keep:
        return False
    o = ord(ch)
    if o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0:
        return True
    if ch in _INVISIBLE_ACTORS:
        return True
    return 0xD800 <= o <= 0xDFFF


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    o = ord(ch)
    if 0xD800 <= o <= 0xDFFF:  # a lone surrogate: from bytes that were not UTF-8
        return REPLACEMENT
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def decode(data: bytes | bytearray | memoryview | str) -> str:
    """`data` as text, every byte that is not UTF-8 replaced by U+FFFD.

    A `str` may still carry lone surrogates (from `surrogateescape`); they are
    replaced the same way."""
    if isinstance(data, str):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in data):
            return "".join(REPLACEMENT if 0xD800 <= ord(c) <= 0xDFFF else c for c in data)
        return data
    return bytes(data).decode("utf-8", "replace")


def _visible(data: bytes | bytearray | memoryview | str, keep: str) -> str:
    """`data` decoded, with every unsafe character but those in `keep` escaped.

    Backslashes are left as written: the text stays as the agent wrote it where
    it was harmless, and only what could act on a terminal changes."""
    text = decode(data)
    if not any(_unsafe(c, keep) for c in text):
        return text
    return "".join(_escape(c) if _unsafe(c, keep) else c for c in text)


def line(data: bytes | bytearray | memoryview | str | None) -> str:
    """`data` for a one-line place: every control character made visible,
    newlines and tabs included, so the text stays on the line it was given."""
    if data is None:
        return ""
    return _visible(data, keep="")


def block(data: bytes | bytearray | memoryview | str | None) -> str:
    """`data` for a multi-line place: newlines and tabs kept, every other
    control character (`\\r`, ESC, bidi overrides) made visible."""
    if data is None:
        return ""
    return _visible(data, keep="\n\t")


def lines(data: bytes | bytearray | memoryview | str | None) -> list[str]:
    """`data` split on newlines, each piece made safe as a `line`."""
    if data is None:
        return []
    return [line(part) for part in decode(data).split("\n")]


def tree(obj: object, blocks: frozenset[str] = frozenset()) -> object:
    """`obj` (a view: dicts, lists, strings, numbers) with every string in it
    made safe as a `line`, for a verb that prints a view as text; the strings
    under a key in `blocks` (an agent's last lines) as a `block`, kept as lines."""
    if isinstance(obj, str):
        return line(obj)
    if isinstance(obj, dict):
        return view(obj, blocks)
    if isinstance(obj, (list, tuple)):
        return [tree(v, blocks) for v in obj]
    return obj


def view(doc: dict[str, Any], blocks: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`tree` of one view document, typed as the document it was: what a verb
    printing a Job or the status reads its fields from."""
    return {
        k: block(v) if k in blocks and isinstance(v, str) else tree(v, blocks)
        for k, v in doc.items()
    }
