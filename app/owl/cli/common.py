"""What every verb of the `owl` command shares: exit codes, the daemon, output.

Light on purpose: every `owl` call imports this, so it imports only argparse,
json and the socket client; the rest is imported inside the verb that needs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

# argparse passes every one of its words through gettext, which looks for
# translation files on disk on each call: two thirds of the time it took to
# build this command line (about fifty parsers). Owl's own words are English
# only, so argparse's are too.
argparse._ = lambda message: message  # type: ignore[attr-defined]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_NO_DAEMON = 0, 1, 2, 3
JSON_ERRORS = False     # set by main when --json is on the line: errors go to stdout as JSON too


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line under the verb's own usage,
    exit 2, and whose leaf verbs take their options anywhere on the line."""

    _intermixing = False

    def error(self, message: str) -> None:  # type: ignore[override]
        from owl.cli.parser import explain_error

        text = explain_error(self, message)
        self.print_usage(sys.stderr)
        print(f"owl: {text}", file=sys.stderr)
        if JSON_ERRORS:
            print_json({"error": text, "exit": EXIT_USAGE})
        raise SystemExit(EXIT_USAGE)

    def _has_verbs(self) -> bool:
        return any(isinstance(a, argparse._SubParsersAction) for a in self._actions)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._intermixing or self._has_verbs():
            return super().parse_known_args(args, namespace)
        # A leaf verb: options and positionals in any order, and anything it
        # does not take refused here, under its own usage (not the top level's).
        self._intermixing = True
        try:
            ns, extras = self._intermixed(list(sys.argv[1:] if args is None else args), namespace)
        finally:
            self._intermixing = False
        if extras:
            self.error(f"{self.prog} does not take {' '.join(extras)!r}" + self._close(extras[0]))
        return ns, extras

    def _intermixed(self, args: list[str], namespace: Any) -> tuple[Any, list[str]]:
        """argparse's intermixed parse, except that every word after `--` is a
        positional, whatever it looks like: `owl add -- --help` queues the
        prompt "--help". Python 3.11's own loses the `--` between its two
        passes (its options pass takes it), so such words were read as options."""
        if "--" not in args:
            return super().parse_known_intermixed_args(args, namespace)
        cut = args.index("--")
        head, tail = args[:cut], args[cut + 1:]
        positionals = self._get_positional_actions()
        saved = [(a, a.nargs, a.default) for a in positionals]
        try:
            for a in positionals:            # the options before `--` first, as argparse does
                a.nargs = a.default = argparse.SUPPRESS
            ns, words = super().parse_known_args(head, namespace)
        finally:
            for a, nargs, default in saved:
                a.nargs, a.default = nargs, default
        strays = [w for w in words if w.startswith("-") and w != "-"]
        if strays:
            return ns, strays
        # then the positionals: those before `--` and all after it, behind a `--` of their own
        return super().parse_known_args(["--", *words, *tail], ns)

    def _close(self, word: str) -> str:
        """"; did you mean '--after-grace'?" for a misspelt option."""
        if not word.startswith("--"):
            return ""
        import difflib

        known = [o for a in self._actions for o in a.option_strings
                 if a.help is not argparse.SUPPRESS]
        close = difflib.get_close_matches(word.split("=")[0], known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]!r}?" if close else ""


def verb(sub: Any, name: str, **kw: Any) -> Parser:
    """A verb whose own --help opens with what it does (argparse shows `help` only
    in the parent's list unless it is also the description). In lists a verb's
    help is a lowercase phrase; atop its own --help, a sentence."""
    text = kw.get("description") or kw.get("help")
    if isinstance(text, str) and text:
        text = text[0].upper() + text[1:]
        kw["description"] = text if text.endswith((".", ")", "?")) else text + "."
    return sub.add_parser(name, **kw)


def json_flag(p: argparse.ArgumentParser, what: str = "the answer as JSON on stdout (errors "
              "too, as {\"error\": ..., \"exit\": N})") -> None:
    p.add_argument("--json", action="store_true", help=what)


def id_number(text: str) -> int:
    """An argparse type for ids, positions and counts: a whole number that a
    request and SQLite can carry (the daemon says what each may be)."""
    from owl.bounds import SQLITE_INT_MAX

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not -SQLITE_INT_MAX <= value <= SQLITE_INT_MAX:
        raise argparse.ArgumentTypeError(f"{text} is out of range (a whole number between "
                                         f"{-SQLITE_INT_MAX} and {SQLITE_INT_MAX})")
    return value


def paths():
    from owl.paths import get_paths

    return get_paths()


def ask(verb_name: str, args: dict[str, Any] | None = None) -> Any:
    from owl.control.client import ask as _ask

    return _ask(paths().socket, verb_name, args)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def local_store():
    """The database, read-only: what read verbs show when no daemon runs."""
    from owl.store import Store

    return Store(paths().db, readonly=True)


def offline(read: Any) -> Any:
    """`read()`, a read of the database with no daemon: a damaged or emptied
    file is refused in one line that names it and the fix (`owl db recover`),
    never a traceback, and never shown as an empty queue."""
    import sqlite3

    from owl import dbrepair
    from owl.errors import DamagedStore, Refused

    try:
        return read()
    except DamagedStore as e:
        raise Refused(str(e)) from None
    except sqlite3.DatabaseError as e:
        raise Refused(dbrepair.damaged(paths().db, str(e))) from None
