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

    preamble = agent_names(a.parser).get(a.shell, "")
    sys.stdout.write(shtab.complete(a.parser, shell=a.shell, preamble=preamble))
    return EXIT_OK


def agent_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every `--agent` completes the built-in agents' names (a configured one
    is typed, as the config may not be readable where the script is made);
    returns the shell functions that list them."""
    from owl.settings.keys import BUILTIN_AGENTS

    names = " ".join(BUILTIN_AGENTS)
    for action in _actions(parser):
        if "--agent" in action.option_strings:
            action.complete = {"bash": "_owl_agent_names", "zsh": f"({names})"}  # type: ignore[attr-defined]
    return {"bash": f'_owl_agent_names() {{ compgen -W "{names}" -- "$1"; }}'}


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out: list[argparse.Action] = []
    for action in parser._actions:
        out.append(action)
        choices = action.choices if isinstance(action.choices, dict) else {}
        for sub in dict.fromkeys(choices.values()):
            if isinstance(sub, argparse.ArgumentParser):  # a verb's own parser
                out += _actions(sub)
    return out
