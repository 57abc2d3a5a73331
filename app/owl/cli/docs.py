"""Shell completion and the man page, both generated from the one parser
(`owl.cli.parser.build_parser`), so neither can drift from `--help`.

    python -m owl.cli.docs man owl.1          # the man page (argparse-manpage)
    python -m owl.cli.docs bash               # what `owl completion bash` prints
"""

from __future__ import annotations

import argparse
import sys

from owl.cli.completion import SHELLS
from owl.cli.parser import build_parser

EXIT_STATUS = """\
.TP
.B 0
done (also when the goal already held: a second \\fBowl pause\\fR says "already paused")
.TP
.B 1
refused; one line on stderr says why
.TP
.B 2
usage: a verb, option or argument \\fBowl\\fR does not take
.TP
.B 3
no daemon is running (\\fBowl status\\fR and \\fBowl jobs\\fR answer from the database first)
.PP
With \\fB\\-\\-json\\fR an error is also a JSON object on stdout: {"error": ..., "exit": N}."""

ENVIRONMENT = """\
.TP
.B OWL_HOME
put everything (config.toml, owl.db, the socket, logs/, worktrees/) under this folder
.TP
.B OWL_NO_AUTOSTART
when 1, \\fBowl add\\fR, \\fBowl start\\fR and \\fBowl shift start\\fR never start a daemon
(as \\fB\\-\\-no\\-start\\fR)
.TP
.B OWL_MACHINE
\\fBmanual\\fR: the daemon reads no input or power; \\fBowl machine idle|input|battery|ac\\fR
tells it what the machine does (for headless machines and scripts)"""


def completion(shell: str) -> str:
    import shtab

    return shtab.complete(build_parser(), shell=shell)


def manpage() -> str:
    """The man page (roff), from the parser and a few sections of its own."""
    from argparse_manpage.manpage import Manpage

    from owl import __version__

    page = Manpage(
        build_parser(),
        {
            "project_name": "owl",
            "version": __version__,
            "manual_title": "Owl manual",
            "manual_section": 1,
            "description": "run coding agents while you are away",
        },
    )
    page.add_section("EXIT STATUS", ">", EXIT_STATUS)
    page.add_section("ENVIRONMENT", ">", ENVIRONMENT)
    return str(page)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m owl.cli.docs", description="Write owl's man page or a completion script."
    )
    p.add_argument("what", choices=("man", *SHELLS), help="the man page, or a shell's completion")
    p.add_argument("out", nargs="?", help="the file to write (default: stdout)")
    a = p.parse_args(argv)
    try:
        text = manpage() if a.what == "man" else completion(a.what)
    except ImportError as e:
        extra = "man" if a.what == "man" else ""
        print(
            f"owl: the {a.what} {'page' if extra else 'completion'} needs {e.name}: "
            + (
                f"pip install 'owl-away[{extra}]' (or, in a checkout, pip install '.[{extra}]')"
                if extra
                else "reinstall Owl"
            ),
            file=sys.stderr,
        )
        return 1
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
