"""The `owl` command line: every verb's parser, built from each verb's
`register`, and the small rewrite that lets options go anywhere.

The same parser feeds `--help`, shell completion and the man page, so every
option and positional carries a help text here and nowhere else.

Built lazily: `VERBS` names each verb and the function that registers it, and
a call that names a verb builds (and imports) that verb alone. Only a line
without one (`owl`, `owl --help`, a misspelt verb) and `owl completion`, which
prints the whole line, build every verb.
"""

from __future__ import annotations


from owl import __version__
from owl.cli.common import Parser

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


def _add(sub: Any) -> None:
    from owl.cli import add

    add.register(sub)


def _jobs(sub: Any) -> None:
    from owl.cli import jobs

    jobs.register_jobs(sub)


def _status(sub: Any) -> None:
    from owl.cli import status

    status.register(sub)


def _agents(sub: Any) -> None:
    from owl.cli import agents

    agents.register(sub)


def _logs(sub: Any) -> None:
    from owl.cli import logs

    logs.register(sub)


def _work(name: str) -> Callable[[Any], None]:
    """The verbs on live work and the processes (`owl.cli.work`), by name."""

    def register(sub: Any) -> None:
        from owl.cli import work

        getattr(work, f"register_{name}")(sub)

    return register


def _config(sub: Any) -> None:
    from owl.cli import setup

    setup.register_config(sub)


def _autostart(sub: Any) -> None:
    from owl.cli import setup

    setup.register_autostart(sub)


def _db(sub: Any) -> None:
    from owl.cli import db

    db.register(sub)


def _notify(sub: Any) -> None:
    from owl.cli import notify

    notify.register(sub)


def _completion(sub: Any) -> None:
    from owl.cli import completion

    completion.register(sub)


#: Every verb, in the order `owl --help` lists them, with what registers it.
VERBS: tuple[tuple[str, Callable[[Any], None]], ...] = (
    ("add", _add),
    ("jobs", _jobs),
    ("status", _status),
    ("agents", _agents),
    ("logs", _logs),
    *((name, _work(name)) for name in ("start", "pause", "resume", "stop", "shift")),
    *((name, _work(name)) for name in ("tray", "daemon", "machine")),
    ("config", _config),
    ("autostart", _autostart),
    ("db", _db),
    ("notify", _notify),
    ("completion", _completion),
)
VERB_NAMES = frozenset(name for name, _ in VERBS)
WHOLE_LINE = frozenset({"completion"})  # verbs that read the whole parser


def build_parser(only: str | None = None) -> Parser:
    """The command line: every verb, or only the verb `only` (what a call that
    names it needs; it parses that verb exactly as the whole line does)."""
    p = Parser(
        prog="owl",
        description="Owl runs coding agents while you are away from the "
        "machine, and gives it back the moment you return. Without a verb, `owl` "
        "starts the tray.",
    )
    p.add_argument("--version", action="version", version=f"owl {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    for name, register in VERBS:
        if only is None or only in WHOLE_LINE or name == only:
            register(sub)
    p.set_defaults(parser=p)  # for `owl completion`, which prints the whole line
    return p


def verb_in(argv: list[str]) -> str | None:
    """The verb on the line: its first word that names one, before any `--`."""
    for word in argv:
        if word == "--":
            return None
        if word in VERB_NAMES:
            return word
    return None


def rewrite(argv: list[str]) -> list[str]:
    """Options before the verb move after it (`owl --json status`), and
    `owl jobs [options]` means `owl jobs list [options]` (and `owl agents` so too)."""
    out = list(argv)
    lead = 0
    while lead < len(out) and out[lead] not in VERB_NAMES and out[lead] != "--":
        lead += 1
    if 0 < lead < len(out) and out[lead] in VERB_NAMES:
        moved, out = out[:lead], out[lead:]
        end = out.index("--") if "--" in out else len(out)  # after `--` all is positionals
        out[end:end] = moved
    if out and out[0] in ("jobs", "agents"):
        if not _words(out[1:]) and not {"-h", "--help"} & set(out):
            out.insert(1, "list")
    return out


LIST_VALUES = frozenset({"--limit"})  # `owl jobs list`'s options that take a value


def _words(argv: list[str]) -> list[str]:
    """The words of `argv` that are neither options nor an option's value."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in LIST_VALUES:
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return out
