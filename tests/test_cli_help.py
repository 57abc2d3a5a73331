"""Help, completion and the man page all come from the one parser: every
option and positional says what it is, typos get a suggestion, extra words are
refused under the verb's own usage, hidden verbs stay out of help."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from owl.cli.parser import build_parser
from owlproc import OWL


def owl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OWL_HOME=str(tmp_path / "home"))
    return subprocess.run([*OWL, *args], env=env, capture_output=True, text=True, timeout=30)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed (tools/setup.sh --test installs it)")
        pytest.skip(f"no {name}")
    return path


def parsers(p: argparse.ArgumentParser, path: str = "owl"):
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from parsers(sub, f"{path} {name}")


def test_every_option_and_positional_is_described():
    missing = []
    for path, p in parsers(build_parser()):
        assert p.description, f"{path} has no description"
        for a in p._actions:
            if isinstance(
                a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
            ):
                continue
            if a.help is None or not a.help.strip():
                missing.append(f"{path} {a.option_strings or a.dest}")
            if a.metavar is None and not a.option_strings and a.choices is None:
                missing.append(f"{path} {a.dest}: no METAVAR")
    assert not missing, missing


def test_top_level_help_lists_the_manual_machine(tmp_path):
    # public since the README's headless hour drives it (and completion offers it)
    top = owl(tmp_path, "--help")
    assert top.returncode == 0
    assert "SUPPRESS" not in top.stdout and "machine  " in top.stdout
    assert "add" in top.stdout and "completion" in top.stdout
    own = owl(tmp_path, "machine", "--help")
    assert own.returncode == 0 and "OWL_MACHINE=manual" in own.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (("stauts",), "unknown verb 'stauts'; did you mean 'status'?"),
        (("jobs", "shwo", "3"), "unknown action 'shwo'; did you mean 'show'?"),
        (("shift", "strat"), "did you mean 'start'?"),
        (("xyzzy",), "unknown verb 'xyzzy' (one of: add, jobs"),
    ],
)
def test_did_you_mean(tmp_path, args, words):
    p = owl(tmp_path, *args)
    assert p.returncode == 2 and p.stdout == ""
    assert words in p.stderr, p.stderr
    assert "did you mean 'machine'" not in p.stderr


@pytest.mark.parametrize(
    "args, usage",
    [
        (("jobs", "list", "14"), "usage: owl jobs list"),
        (("status", "now"), "usage: owl status"),
        (("pause", "1"), "usage: owl pause"),
        (("jobs", "move", "1", "2", "3"), "usage: owl jobs move"),
        (("config", "path", "x"), "usage: owl config path"),
    ],
)
def test_extra_arguments_are_refused_under_the_verbs_own_usage(tmp_path, args, usage):
    p = owl(tmp_path, *args)
    assert p.returncode == 2, p
    first, *rest = p.stderr.splitlines()
    assert first.startswith(usage), p.stderr
    assert rest[-1] == f"owl: {usage[7:]} does not take {args[-1]!r}", p.stderr


def test_a_misspelt_option_gets_a_suggestion(tmp_path):
    p = owl(tmp_path, "stop", "--after-grase")
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == (
        "owl: owl stop does not take '--after-grase'; did you mean '--after-grace'?"
    )


def test_options_go_anywhere_and_json_errors_are_objects_on_stdout(tmp_path):
    p = owl(tmp_path, "--json", "status")  # before the verb
    assert p.returncode == 3
    assert json.loads(p.stdout)["daemon"] is False
    p = owl(tmp_path, "pause", "--json")
    assert p.returncode == 3
    assert json.loads(p.stdout) == {
        "error": "no Owl daemon is running (start one with: owl daemon --detach)",
        "exit": 3,
    }
    p = owl(tmp_path, "jobs", "show", "--json", "x")
    assert p.returncode == 2 and json.loads(p.stdout)["exit"] == 2


def test_bash_completion_completes_verbs_and_actions_not_hidden_ones(tmp_path):
    bash = tool("bash")
    script = tmp_path / "owl.bash"
    script.write_text(owl(tmp_path, "completion", "bash").stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        cmd = (
            f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
            f"COMP_LINE='{line}'; COMP_POINT={len(line)}; _shtab_owl; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        out = subprocess.run([bash, "-c", cmd], capture_output=True, text=True, timeout=30)
        return out.stdout.split()

    assert complete("owl", "jo") == ["jobs"]
    assert "show" in complete("owl", "jobs", "''") and "verify" in complete("owl", "jobs", "''")
    assert complete("owl", "mach") == ["machine"]  # the manual machine is public
    assert "--after-grace" in complete("owl", "stop", "--")
    # every built-in agent, the new ones too
    assert complete("owl", "add", "--agent", "''") == [
        "claude",
        "codex",
        "gemini",
        "opencode",
        "copilot",
        "pi",
        "aider",
    ]
    assert complete("owl", "add", "--agent", "co") == ["codex", "copilot"]


def test_fish_completion_completes_verbs(tmp_path):
    fish = tool("fish")
    script = tmp_path / "owl.fish"
    script.write_text(owl(tmp_path, "completion", "fish").stdout)
    out = subprocess.run(
        [fish, "--no-config", "-c", f"source {script}; complete -C 'owl st'"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    words = {line.split("\t")[0] for line in out.stdout.splitlines()}
    assert {"status", "start", "stop"} <= words, out


def test_zsh_completion_loads(tmp_path):
    zsh = tool("zsh")
    script = tmp_path / "_owl"
    script.write_text(owl(tmp_path, "completion", "zsh").stdout)
    out = subprocess.run(
        [
            zsh,
            "-f",
            "-c",
            f"autoload -U compinit; compinit -u -D; source {script}; whence -w _shtab_owl",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and "_shtab_owl: function" in out.stdout, out


def test_the_man_page_renders_from_the_same_parser(tmp_path):
    man = tool("man")
    page = tmp_path / "owl.1"
    from owl.cli import docs

    assert docs.main(["man", str(page)]) == 0
    out = subprocess.run(
        [man, "-l", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0"),
    )
    assert out.returncode == 0, out.stderr
    text = re.sub(".\b", "", out.stdout)  # man's overstrike bold, when not on a tty
    text = re.sub("\x1b\\[[0-9;]*m", "", text)  # or groff 1.23's colours and bold (SGR)
    # groff 1.23 (Debian 13's) sets quotes and hyphens as typography: the words are the same
    text = text.translate({ord(c): "'" for c in "\u2018\u2019\u00b4"})
    text = text.translate({ord(c): "-" for c in "\u2010\u2011\u2212"})
    for words in (
        "NAME",
        "owl - run coding agents",
        "COMMAND 'owl jobs drop'",
        "--after-grace",
        "EXIT STATUS",
        "OWL_NO_AUTOSTART",
        "OWL_MACHINE",
    ):
        assert words in text, words
    assert "SUPPRESS" not in text
