"""The person's git config as a Run gets it: an allow-list of harmless keys.

Why: a Run's git needs the person's name and e-mail (its commits are theirs)
and a few habits (line endings, the default branch, how a diff reads), and
nothing else of ``~/.gitconfig``. The rest could reach a secret or run a
program outside what the Run was given: ``credential.helper`` (a store of
tokens, a daemon's socket), ``include.path`` / ``includeIf`` (a file of
secrets), ``core.sshCommand``, ``user.signingKey`` and ``gpg.*`` (keys),
``url.*.insteadOf`` with a token in the URL, ``http.extraHeader`` (a bearer
token). So the copy keeps only the keys below (an allow-list: a key git adds
tomorrow is left out until named here), and drops every value holding a
line break or a NUL.

Pure: text in, text out; git's own syntax as far as these keys need it
(sections with or without a quoted subsection, ``key = value``, comments,
quoted values). A subsection keeps its keys only for the sections named in
``SUBSECTIONS`` (``color.diff``, ``diff "lisp"`` is left out: drivers run
programs).
"""

from __future__ import annotations

import re

KEYS = frozenset(
    {
        "user.name",
        "user.email",
        "author.name",
        "author.email",
        "committer.name",
        "committer.email",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.quotepath",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.whitespace",
        "core.abbrev",
        "init.defaultbranch",
        "pull.rebase",
        "pull.ff",
        "push.default",
        "merge.conflictstyle",
        "merge.ff",
        "rebase.autosquash",
        "rebase.autostash",
        "diff.algorithm",
        "diff.renames",
        "diff.colormoved",
        "diff.mnemonicprefix",
        "color.ui",
        "column.ui",
        "branch.sort",
        "tag.sort",
        "log.date",
        "format.pretty",
        "status.showuntrackedfiles",
        "fetch.prune",
        "advice.detachedhead",
        "help.autocorrect",
    }
)
SUBSECTIONS = frozenset({"color"})

_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")


def _value(raw: str | None) -> str | None:
    """A value as git reads it (quotes and escapes), comments cut; None when
    it goes on to the next line (a trailing backslash): left out."""
    if raw is None:
        return "true"
    out, quoted, i = [], False, 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 >= len(raw):
                return None
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip() if not quoted else None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"'


def kept(texts: list[str]) -> list[tuple[str, str]]:
    """The (key, value) pairs of the allow-list the config files say, in order."""
    out: list[tuple[str, str]] = []
    for text in texts:
        section: str | None = None
        for line in text.splitlines():
            m = _SECTION.match(line)
            if m:
                name, sub, rest = m.group(1).lower(), m.group(2), m.group(3)
                if sub is None and "." in name:  # [section.sub], the old form
                    name, _, sub = name.partition(".")
                section = f"{name}.{sub}" if sub is not None else name
                line = rest
                if not line.strip():
                    continue
            k = _KEY.match(line)
            if section is None or k is None:
                continue
            head, _, sub = section.partition(".")
            key = f"{section}.{k.group(1).lower()}"
            allowed = (head in SUBSECTIONS and sub) or key in KEYS
            value = _value(k.group(2))
            if not allowed or value is None or "\n" in value or "\0" in value:
                continue
            out.append((key, value))
    return out


def sanitized(texts: list[str]) -> str:
    """A git config file holding only the allow-listed keys of ``texts``
    (``~/.gitconfig``, then ``~/.config/git/config``: the later one wins, as in git)."""
    lines = ["# The person's git config as a contained Run gets it: only harmless keys."]
    last = None
    for key, value in kept(texts):
        section, _, name = key.rpartition(".")
        head, dot, sub = section.partition(".")
        if section != last:
            lines.append(f"[{head}]" if not dot else f"[{head} {_quote(sub)}]")
            last = section
        lines.append(f"\t{name} = {_quote(value)}")
    return "\n".join(lines) + "\n"
