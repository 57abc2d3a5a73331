"""The `owl` command: parse the verb, ask the daemon, print the answer.

Exit codes: 0 done; 1 refused (one line on stderr says why); 2 usage;
3 no daemon running (read verbs still answer from the database first).
With --json, an error is also a JSON object on stdout: {"error": ..., "exit": N}.

This package is on the path of every `owl` call, and a call should cost
little more than the interpreter's own start. So this module imports nothing
of its own at the top; `owl --version` answers before any import, and a verb
builds the parser for itself alone (`owl.cli.parser`) and imports only its own
module. No pynput or pystray anywhere on the way: they need a display just to
import.

Layout: `common` (exit codes, the daemon, output), `parser` (the command line,
built verb by verb), one module per verb or verb group (`add`, `jobs`,
`status`, `work`, `setup`).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # what argparse's version action prints, without argparse
        from owl import __version__

        print(f"owl {__version__}")
        return 0
    from owl.cli import common
    from owl.cli.parser import build_parser, rewrite, verb_in

    parser = build_parser(verb_in(argv))
    argv = rewrite(argv)
    as_json = "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]
    common.JSON_ERRORS = as_json
    args = parser.parse_args(argv)
    if args.verb is None:
        from owl.cli.work import cmd_tray

        args.fn = cmd_tray
    return common.run(args, as_json)
