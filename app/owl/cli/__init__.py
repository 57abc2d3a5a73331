"""The `owl` command: parse the verb, ask the daemon, print the answer.

Exit codes: 0 done; 1 refused (one line on stderr says why); 2 usage;
3 no daemon running (read verbs still answer from the database first).
With --json, an error is also a JSON object on stdout: {"error": ..., "exit": N}.

This package is on the path of every `owl` call, so it imports only what the
verb needs: argparse, json and the socket client at the top, the rest inside
the verb (no pynput or pystray: they need a display just to import).

Layout: `common` (exit codes, the daemon, output), `parser` (the whole command
line), one module per verb group (`jobs`, `status`, `work`, `setup`).
"""

from __future__ import annotations

import sys

from owl.cli.common import EXIT_NO_DAEMON, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, print_json
from owl.errors import NoDaemon, Refused

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "EXIT_NO_DAEMON"]


def build_parser():
    from owl.cli.parser import build_parser as build

    return build()


def _fail(message: str, code: int, as_json: bool) -> int:
    from owl import textsafe

    message = textsafe.line(message)      # it may quote agent or repository text
    print(f"owl: {message}", file=sys.stderr)
    if as_json:
        print_json({"error": message, "exit": code})
    return code


def main(argv: list[str] | None = None) -> int:
    from owl.cli.parser import rewrite

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    argv = rewrite(argv, parser)
    as_json = "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]
    from owl.cli import common

    common.JSON_ERRORS = as_json
    args = parser.parse_args(argv)
    if args.verb is None:
        from owl.cli.work import cmd_tray

        args.fn = cmd_tray
    try:
        return args.fn(args)
    except Refused as e:
        return _fail(str(e), EXIT_REFUSED, as_json)
    except NoDaemon as e:
        return _fail(str(e), EXIT_NO_DAEMON, as_json)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the daemon said something unreadable, and the like
        from owl.control.client import DaemonError

        if isinstance(e, DaemonError):
            return _fail(str(e), e.exit_code, as_json)
        raise
