"""`owl completion SHELL`: the completion script, generated from this command line.

The verb is given the whole parser it belongs to (`parser` in its arguments,
set by `owl.cli.parser.build_parser`), so it need not import the parser that
registers it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from owl.cli.common import EXIT_OK, verb

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    s = verb(
        sub,
        "completion",
        help="print shell completion for bash, zsh or fish",
        description="Print the completion script for a shell, generated from this "
        "command line. bash: owl completion bash > "
        "~/.local/share/bash-completion/completions/owl; zsh: owl completion zsh > "
        '"${fpath[1]}/_owl"; fish: owl completion fish > '
        "~/.config/fish/completions/owl.fish",
    )
    s.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    s.set_defaults(fn=cmd_completion)


def cmd_completion(a: argparse.Namespace) -> int:
    import shtab

    sys.stdout.write(shtab.complete(a.parser, shell=a.shell))
    return EXIT_OK
