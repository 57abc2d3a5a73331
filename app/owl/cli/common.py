"""What every verb of the `owl` command shares: exit codes, the daemon, output.

Light on purpose: every `owl` call imports this, so it imports only argparse,
json and the socket client; the rest is imported inside the verb that needs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# argparse passes every one of its words through gettext, which looks for
# translation files on disk on each call: two thirds of the time it took to
# build this command line (about fifty parsers). Owl's own words are English
# only, so argparse's are too.
argparse._ = lambda message: message  # type: ignore[attr-defined]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_NO_DAEMON = 0, 1, 2, 3
JSON_ERRORS = False  # set by main when --json is on the line: errors go to stdout as JSON too


def terminal_size() -> tuple[int, int]:
    """(columns, lines) as `shutil.get_terminal_size` reads them (COLUMNS and
    LINES, then standard output's terminal, else 80 by 24), without
    importing shutil (with its compression modules) on every call."""

    def env(name: str) -> int:
        try:
            return max(0, int(os.environ.get(name, "0")))
        except ValueError:
            return 0

    columns, lines = env("COLUMNS"), env("LINES")
    if not columns or not lines:
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno()) if sys.__stdout__ else None
        except (ValueError, OSError):
            size = None
        columns = columns or (size.columns if size else 0) or 80
        lines = lines or (size.lines if size else 0) or 24
    return columns, lines


class Formatter(argparse.HelpFormatter):
    """argparse's help layout at the terminal's width. argparse makes one of
    these for every argument it is given (to check its metavar), and its own
    imports shutil for the width: 1.7 ms of every `owl` call."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=terminal_size()[0] - 2)


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line under the verb's own usage,
    exit 2, and whose leaf verbs take their options anywhere on the line.

    It keeps its own record of what it was given (its options, its
    positionals, its verbs) rather than reading argparse's private lists."""

    _intermixing = False

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.owl_options: list[str] = []  # option strings shown in --help
        self.owl_positionals: list[argparse.Action] = []
        self.owl_verbs: list[str] = []  # the names of its sub-parsers, in order
        kw.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kw)  # (adds -h through add_argument)

    def add_argument(self, *args: Any, **kw: Any) -> argparse.Action:  # type: ignore[override]
        action = super().add_argument(*args, **kw)
        if not action.option_strings:
            self.owl_positionals.append(action)
        elif action.help is not argparse.SUPPRESS:
            self.owl_options += action.option_strings
        return action

    def add_subparsers(self, **kw: Any) -> Any:
        return Verbs(self, super().add_subparsers(**kw))

    def error(self, message: str) -> None:  # type: ignore[override]
        text = explain_error(self, message)
        self.print_usage(sys.stderr)
        print(f"owl: {text}", file=sys.stderr)
        if JSON_ERRORS:
            print_json({"error": text, "exit": EXIT_USAGE})
        raise SystemExit(EXIT_USAGE)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._intermixing or self.owl_verbs:
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
        head, tail = args[:cut], args[cut + 1 :]
        positionals = self.owl_positionals
        saved = [(a, a.nargs, a.default) for a in positionals]
        try:
            for a in positionals:  # the options before `--` first, as argparse does
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
        """ "; did you mean '--after-grace'?" for a misspelt option."""
        if not word.startswith("--"):
            return ""
        import difflib

        close = difflib.get_close_matches(word.split("=")[0], self.owl_options, n=1, cutoff=0.6)
        return f"; did you mean {close[0]!r}?" if close else ""


class Verbs:
    """A parser's verbs (argparse's sub-parsers action), each one's name told
    to the parser that holds them as it is added."""

    def __init__(self, parent: Parser, action: Any) -> None:
        self.parent, self.action = parent, action

    def add_parser(self, name: str, **kw: Any) -> Parser:
        self.parent.owl_verbs.append(name)
        parser: Parser = self.action.add_parser(name, **kw)
        return parser


def verb(sub: Any, name: str, **kw: Any) -> Parser:
    """A verb whose own --help opens with what it does (argparse shows `help` only
    in the parent's list unless it is also the description). In lists a verb's
    help is a lowercase phrase; atop its own --help, a sentence."""
    text = kw.get("description") or kw.get("help")
    if isinstance(text, str) and text:
        text = text[0].upper() + text[1:]
        kw["description"] = text if text.endswith((".", ")", "?")) else text + "."
    return sub.add_parser(name, **kw)


def with_actions(sub: Any, name: str, *, dest: str = "action", **kw: Any) -> Any:
    """A verb that must be followed by one of its ACTION words (`owl db
    check`): made as `verb` makes it; its list of actions, to add them to."""
    return verb(sub, name, **kw).add_subparsers(dest=dest, metavar="ACTION", required=True)


def json_flag(
    p: argparse.ArgumentParser,
    what: str = 'the answer as JSON on stdout (errors too, as {"error": ..., "exit": N})',
) -> None:
    p.add_argument("--json", action="store_true", help=what)


def id_number(text: str) -> int:
    """An argparse type for ids, positions and counts: the ASCII digits 0-9 only
    (Python's int() would also take "３", "٣", " 3", "+3" and "3_0"), within
    what a request and SQLite can carry (the daemon says what each may be)."""
    from owl.rules.bounds import SQLITE_INT_MAX, digits

    value = digits(text)
    if value is None or value < 1:  # 0 and abc alike: the same words, exit 2
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of 1 or more written with the digits 0-9"
        )
    if value > SQLITE_INT_MAX:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range (a whole number between 1 and {SQLITE_INT_MAX})"
        )
    return value


def paths():
    from owl.settings.paths import get_paths

    return get_paths()


def ask(verb_name: str, args: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
    """Ask the daemon. Its socket is worked out on strings where that is
    plain (OWL_HOME, or a private XDG_RUNTIME_DIR); through `paths`
    (pathlib, platformdirs) otherwise, or when that first place has no
    daemon: the two could differ only where platformdirs sees further. When
    nobody answers there either, the home's lock names the socket of the
    daemon that runs (`owl.control.locate`, imported only then: a daemon
    that answers costs the hot verbs nothing more)."""
    from owl.control.client import ask as _ask
    from owl.errors import NoDaemon
    from owl.settings import socketpath

    home = socketpath.under_home()
    where = home or socketpath.likely_default()
    nobody: NoDaemon | None = None
    if where is not None:
        try:
            return _ask(where, verb_name, args, timeout)
        except NoDaemon as e:  # raised before anything was sent: asking again is safe
            nobody = e
    from owl.control import locate

    if home is not None and nobody is not None:
        return locate.through_lock(socketpath.home_lock(), home, verb_name, args, timeout, nobody)
    p = paths()
    if where is not None and nobody is not None and str(p.socket) == where:
        return locate.through_lock(str(p.lock), where, verb_name, args, timeout, nobody)
    return locate.ask(str(p.socket), lambda: str(p.lock), verb_name, args, timeout)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def local_store():
    """The database, read-only: what read verbs show when no daemon runs."""
    from owl.store.db import Store

    return Store(paths().db, readonly=True)


def offline(read: Any) -> Any:
    """`read()`, a read of the database with no daemon: a damaged or emptied
    file is refused in one line that names it and the fix (`owl db recover`),
    never a traceback, and never shown as an empty queue."""
    import sqlite3

    from owl.store import repair as dbrepair
    from owl.errors import DamagedStore, Refused

    try:
        return read()
    except DamagedStore as e:
        raise Refused(str(e)) from None
    except sqlite3.DatabaseError as e:
        raise Refused(dbrepair.damaged(paths().db, str(e))) from None


_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)")


def explain_error(parser: Parser, message: str) -> str:
    """argparse's message, with "did you mean" for a misspelt verb or action."""
    m = _CHOICE.match(message)
    if not m:
        return message
    word = m.group(2)
    shown = parser.owl_verbs or [c.strip(" '") for c in m.group(3).split(",")]
    close = close_word(word, shown)
    hint = f"; did you mean {close!r}?" if close else f" (one of: {', '.join(shown)})"
    what = "verb" if parser.prog == "owl" else "action"
    return f"unknown {what} {word!r}{hint}"


def edits(a: str, b: str) -> int:
    """Letters to add, drop, change or swap to make `a` into `b` (optimal string
    alignment): a slip of the fingers is 1 or 2, another word is more."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def close_word(word: str, choices: list[str]) -> str | None:
    """The one verb `word` is a slip for: within 1 edit (2 for words of six
    letters or more), and nearer than any other. `bogus` is no slip for `logs`."""
    allowed = 1 if len(word) < 6 else 2
    scored = sorted((edits(word.lower(), c), c) for c in choices)
    if not scored or scored[0][0] > allowed:
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None  # two as near: no guess
    return scored[0][1]


def run(args: argparse.Namespace, as_json: bool) -> int:
    """Run the verb parsed into `args`; a refusal, a missing daemon or an
    unreadable answer becomes its one line and its exit code."""
    from owl.errors import NoDaemon, Refused

    try:
        code: int = args.fn(args)
        return code
    except Refused as e:
        return fail(str(e), EXIT_REFUSED, as_json)
    except NoDaemon as e:
        return fail(str(e), EXIT_NO_DAEMON, as_json)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the daemon said something unreadable, and the like
        from owl.control.client import DaemonError

        if isinstance(e, DaemonError):
            return fail(str(e), e.exit_code, as_json)
        raise


def fail(message: str, code: int, as_json: bool) -> int:
    from owl import textsafe

    message = textsafe.line(message)  # it may quote agent or repository text
    print(f"owl: {message}", file=sys.stderr)
    if as_json:
        print_json({"error": message, "exit": code})
    return code
