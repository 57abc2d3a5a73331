"""The `owl` command line: every verb's parser, built from each verb group's
`register`, and the small rewrites that let options go anywhere.

The same parser feeds `--help`, shell completion and the man page, so every
option and positional carries a help text here and nowhere else.
"""

from __future__ import annotations

import argparse
import difflib
import re

from owl import __version__
from owl.cli import db, docs, jobs, logs, setup, status, work
from owl.cli.common import Parser

HIDDEN = ("machine",)   # the manual machine: for tests and headless scripts, not for --help
GROUPS = (jobs, status, logs, work, setup, db, docs)


def build_parser() -> Parser:
    p = Parser(prog="owl", description="Owl runs coding agents while you are away from the "
               "machine, and gives it back the moment you return. Without a verb, `owl` "
               "starts the tray.")
    p.add_argument("--version", action="version", version=f"owl {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    _hide(sub, HIDDEN)
    _require_actions(p)
    return p


def _require_actions(p: argparse.ArgumentParser) -> None:
    """A verb with actions (`owl db`, `owl shift`) needs one: a usage error, not a crash."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                for b in sub._actions:
                    if isinstance(b, argparse._SubParsersAction):
                        b.required = True


def _hide(sub: argparse._SubParsersAction, names: tuple[str, ...]) -> None:
    """Leave verbs out of --help entirely (argparse's SUPPRESS prints them as
    `==SUPPRESS==` in Python 3.11), while they still parse."""
    sub._choices_actions = [a for a in sub._choices_actions if a.dest not in names]


def visible_verbs(p: argparse.ArgumentParser) -> list[str]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return [c.dest for c in a._choices_actions]
    return []


_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)")


def explain_error(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's message, with "did you mean" for a misspelt verb or action, and
    without the hidden verbs in the list of choices."""
    m = _CHOICE.match(message)
    if not m:
        return message
    word = m.group(2)
    shown = visible_verbs(parser) or [c.strip(" '") for c in m.group(3).split(",")]
    shown = [c for c in shown if c not in HIDDEN]
    close = difflib.get_close_matches(word, shown, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else f" (one of: {', '.join(shown)})"
    what = "verb" if parser.prog == "owl" else "action"
    return f"unknown {what} {word!r}{hint}"


def rewrite(argv: list[str], p: argparse.ArgumentParser) -> list[str]:
    """Options before the verb move after it (`owl --json status`), and
    `owl jobs [options]` means `owl jobs list [options]`."""
    verbs = set(visible_verbs(p)) | set(HIDDEN)
    out = list(argv)
    lead = 0
    while lead < len(out) and out[lead] not in verbs and out[lead] != "--":
        lead += 1
    if 0 < lead < len(out) and out[lead] in verbs:
        moved, out = out[:lead], out[lead:]
        end = out.index("--") if "--" in out else len(out)   # after `--` all is positionals
        out[end:end] = moved
    if out and out[0] == "jobs":
        rest = [t for t in out[1:] if not t.startswith("-")]
        if not rest and not {"-h", "--help"} & set(out):
            out.insert(1, "list")
    return out
