"""Ids are the ASCII digits 0-9 and nothing else, in the `owl` command and at the
socket: "３" and "٣" are not job 3, and `true`, `NaN`, `1e3` and `-1` are no ids;
each is refused in one line that shows what was given."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from owl.cli.common import id_number
from owl.control import args as control_args
from owl.errors import Refused
from owl.rules import bounds

NOT_IDS = [
    "３",
    "٣",
    "true",
    "NaN",
    "1e3",
    "-1",
    " 3",
    "3 ",
    "+3",
    "3_0",
    "0x3",
    "",
    "3.0",
    "Infinity",
    "𝟑",
    "1" * 41,
]


@pytest.mark.parametrize("text", NOT_IDS)
def test_the_command_takes_only_ascii_digits(text):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        id_number(text)
    assert repr(text) in str(e.value) and "\n" not in str(e.value)


def test_ascii_digits_are_ids():
    assert id_number("3") == 3 and id_number("007") == 7
    assert id_number(str(bounds.SQLITE_INT_MAX)) == bounds.SQLITE_INT_MAX
    with pytest.raises(argparse.ArgumentTypeError, match="between 1 and"):
        id_number(str(bounds.SQLITE_INT_MAX + 1))


@pytest.mark.parametrize(
    "value", ["3", "３", True, False, float("nan"), 3.0, -1, 0, None, [3], {"id": 3}, 10**30]
)
def test_the_socket_takes_only_json_whole_numbers_from_1(value):
    with pytest.raises(Refused) as e:
        control_args.ident({"id": value}, "id")
    assert "\n" not in str(e.value)
    assert "not None" not in str(e.value)
    assert control_args.ident({"id": 3}, "id") == 3


def test_a_missing_id_is_said_to_be_missing():
    with pytest.raises(Refused, match="job_id is missing"):
        control_args.ident({"id": 3}, "job_id")


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "show", "３"],
        ["jobs", "drop", "٣"],
        ["jobs", "reply", "３", "hi"],
        ["logs", "true"],
        ["jobs", "move", "1", "-1"],
        ["jobs", "show", "--", "-1"],
    ],
)
def test_the_owl_command_refuses_them_in_one_line_with_the_id_shown(tmp_path, argv):
    env = dict(os.environ, OWL_HOME=str(tmp_path), OWL_NO_AUTOSTART="1")
    p = subprocess.run(
        [sys.executable, "-m", "owl", *argv], env=env, capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2, p
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("owl: ") and repr(argv[-1] if argv[-1] != "hi" else argv[-2]) in last
    assert "Traceback" not in p.stderr
