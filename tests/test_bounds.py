"""Bounds on every number: the config, the `owl` command and the socket.

The socket part is a hypothesis fuzz of every verb against the real daemon:
whatever values arrive, every answer is a one-line refusal or a success, never
an internal error or a closed connection, and `owl status` still answers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from owl.rules import bounds
from owl.settings import config as configmod
from owl.rules import shifts
from owlproc import OwlDaemon, make_project
from test_socket import exchange, socket_of

VERBS = [
    "status",
    "add",
    "jobs.list",
    "jobs.show",
    "jobs.drop",
    "drop",
    "jobs.accept",
    "accept",
    "verify",
    "jobs.review",
    "review",
    "jobs.extend",
    "jobs.move",
    "jobs.verify",
    "start",
    "pause",
    "resume",
    "stop",
    "machine",
    "shift.start",
    "shift_start",
    "shift.stop",
    "shift.status",
    "ping",
]
ARGS = [
    "limit",
    "id",
    "job_id",
    "position",
    "attempts",
    "force",
    "all",
    "prompt",
    "project",
    "agent",
    "for_s",
    "until_empty",
    "require_power",
    "replace",
    "event",
    "merge",
    "delete_branch",
]

BIG = [
    10**30,
    -(10**30),
    2**63,
    2**63 - 1,
    -(2**63),
    2**64,
    0,
    -1,
    1,
    3.6e18,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
]
scalars = st.one_of(
    st.sampled_from(BIG),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["idle", "input", "x", "", "1h", "7"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("bounds")
    project = make_project(root / "proj")
    # The agent ignores its prompt: nothing a fuzzed prompt says runs.
    cfg = {
        "agents": {"quiet": {"command": [sys.executable, "-c", "pass", "{prompt}"]}},
        "agent": {"default": "quiet"},
    }
    with OwlDaemon(root / "home", cfg) as d:
        d.project = project  # type: ignore[attr-defined]
        d.sock = socket_of(d.home)  # type: ignore[attr-defined]
        yield d


def _ask_raw(d: OwlDaemon, payload: bytes) -> dict[str, Any]:
    reply = exchange(d.sock, payload)
    assert reply is not None, "the daemon closed the connection without a word"
    return reply


def _assert_answer(reply: dict[str, Any]) -> None:
    if reply["ok"]:
        return
    assert "\n" not in reply["error"], reply
    assert "internal error" not in reply["error"], reply
    assert reply["exit"] in (1, 2), reply


FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# The arguments each verb reads; the fuzz gives each of them a value of any
# kind, and sometimes leaves one out or adds one no verb reads.
VERB_ARGS = {
    "status": [],
    "add": ["prompt", "project", "agent", "attempts"],
    "jobs.list": ["all", "limit"],
    "jobs.show": ["id"],
    "jobs.drop": ["id", "force"],
    "drop": ["job_id", "force"],
    "jobs.accept": ["id", "merge", "delete_branch"],
    "accept": ["job_id", "merge"],
    "verify": ["job_id"],
    "jobs.review": ["id"],
    "review": ["job_id"],
    "jobs.extend": ["id", "attempts"],
    "jobs.move": ["id", "position"],
    "jobs.verify": ["id"],
    "start": [],
    "pause": [],
    "resume": [],
    "stop": ["force"],
    "machine": ["event"],
    "shift.start": ["for_s", "until_empty", "require_power", "replace"],
    "shift_start": ["for_s"],
    "shift.stop": [],
    "shift.status": [],
    "ping": [],
}
assert set(VERB_ARGS) == set(VERBS)


@st.composite
def requests(draw):
    verb = draw(st.sampled_from(VERBS))
    args = {k: draw(values) for k in VERB_ARGS[verb] if draw(st.integers(0, 5))}
    args.update(draw(st.dictionaries(st.sampled_from(ARGS), values, max_size=1)))
    return verb, args


@FUZZ
@given(req=requests())
def test_every_verb_answers_any_values_in_one_line(daemon, req):
    verb, args = req
    if args.get("project") == "":
        args["project"] = str(daemon.project)  # a real project, so add gets further
    payload = json.dumps({"v": 1, "verb": verb, "args": args}).encode() + b"\n"
    _assert_answer(_ask_raw(daemon, payload))


def test_status_answers_after_the_fuzz_and_nothing_out_of_bounds_was_stored(daemon):
    # runs after the fuzz in file order; the daemon must still be whole
    st_ = daemon.status()
    assert st_["machine"] is not None
    sh = st_.get("shift")
    if sh and sh.get("on"):
        assert sh["left_s"] <= bounds.MAX_SHIFT_S
    listed = daemon.json("jobs", "list", "--all")
    assert all(
        1 <= j["attempts_left"] <= bounds.MAX_ATTEMPTS for j in listed if j["state"] == "pending"
    )


@pytest.mark.parametrize(
    "payload, words",
    [
        (b'{"v":1,"verb":"jobs.show","args":{"id":1000000000000000000000000000000}}', "between"),
        (b'{"v":1,"verb":"add","args":{"prompt":"x","project":"/","agent":["a"]}}', "string"),
        (b'{"v":1,"verb":"add","args":{"prompt":"x","project":"/","attempts":true}}', "whole"),
        (b'{"v":1,"verb":"jobs.drop","args":{"id":1,"force":"no"}}', "true or false"),
        (b'{"v":1,"verb":"shift.start","args":{"for_s":3.6e18}}', "at most 7d"),
        (b'{"v":1,"verb":"shift.start","args":{"for_s":1e999}}', "at most 7d"),
        (b'{"v":1,"verb":"jobs.move","args":{"id":1,"position":1e400}}', "whole number"),
        # ids: JSON whole numbers from 1, nothing else
        (b'{"v":1,"verb":"jobs.show","args":{"id":-1}}', "between 1 and"),
        (b'{"v":1,"verb":"jobs.show","args":{"id":NaN}}', "whole number, not nan"),
        (b'{"v":1,"verb":"jobs.show","args":{"id":true}}', "whole number, not True"),
        (b'{"v":1,"verb":"jobs.show","args":{"id":"\\uff13"}}', "whole number, not '\uff13'"),
        (b'{"v":1,"verb":"drop","args":{"id":3}}', "job_id is missing"),
        (
            b'{"v":1,"verb":"status","args":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
            "nested deeper than 8",
        ),
        (b'{"v":1,"verb":"status","args":{"a":[[[[[[[[1]]]]]]]]}}', "nested deeper than 8"),
    ],
)
def test_values_out_of_bounds_are_refused_in_one_line(daemon, payload, words):
    reply = _ask_raw(daemon, payload + b"\n")
    assert reply["ok"] is False and words in reply["error"], reply
    _assert_answer(reply)
    assert daemon.owl("status").returncode == 0


def test_a_shift_past_a_week_is_refused_by_the_command_and_not_stored(daemon):
    p = daemon.owl("shift", "start", "--for", "999999999999999h")
    assert p.returncode == 2 and "at most 7d" in p.stderr.strip().splitlines()[-1], p.stderr
    assert "Traceback" not in p.stderr
    p = daemon.owl("jobs", "show", str(10**30))
    assert p.returncode == 2 and "between" in p.stderr
    p = daemon.owl("add", "--project", str(daemon.project), "--attempts", "100000", "x")
    assert p.returncode == 1 and "at most 1000" in p.stderr, p.stderr
    p = daemon.owl("add", "--project", str(daemon.project), "--attempts", str(10**30), "x")
    assert p.returncode == 2 and "between" in p.stderr, p.stderr
    assert daemon.owl("status").returncode == 0


def test_a_stored_shift_beyond_bounds_is_dropped_not_fatal(tmp_path: Path):
    with OwlDaemon(tmp_path / "home") as d:
        pass
    import sqlite3

    with sqlite3.connect(d.home / "owl.db") as db:
        db.execute(
            "INSERT INTO settings(key, value) VALUES('shift', ?)",
            (json.dumps({"started_at": 1.0e9, "ends_at": 3.6e18}),),
        )
    with d:
        st_ = d.status()
        assert st_["shift"] is None
        assert "Shift on" not in d.ok("status")


@pytest.mark.parametrize(
    "section, key, value, words",
    [
        ("interruption", "grace_window", "999999999999999h", "at most 1d"),
        ("interruption", "grace_window", "25h", "at most 1d"),
        ("idle", "after", "2d", "at most 1d"),
        ("runs", "timeout", "8d", "at most 7d"),
        ("runs", "stall", "1d1s", "at most 1d"),
        ("runs", "max_parallel", (os.cpu_count() or 1) * 4 + 1, "at most"),
        ("runs", "max_parallel", True, "whole number"),
        ("jobs", "attempts", 1001, "at most 1000"),
        ("jobs", "attempts", 1.0, "whole number"),
    ],
)
def test_config_values_past_their_bounds_are_refused(section, key, value, words):
    with pytest.raises(configmod.ConfigError) as e:
        configmod.from_dict({section: {key: value}}, "config.toml")
    assert words in str(e.value) and f"{section}.{key}" in str(e.value)


def test_config_values_at_their_bounds_are_taken():
    cfg = configmod.from_dict(
        {
            "interruption": {"grace_window": "1d"},
            "runs": {"timeout": "7d", "max_parallel": (os.cpu_count() or 1) * 4},
            "jobs": {"attempts": 1000},
        }
    )
    assert cfg.grace_window == 86400 and cfg.timeout == 7 * 86400 and cfg.attempts == 1000


def test_a_shift_is_at_most_a_week():
    with pytest.raises(ValueError, match="at most a week"):
        shifts.begin(None, 0.0, bounds.WEEK + 1)
    assert shifts.begin(None, 0.0, bounds.WEEK).ends_at == bounds.WEEK
    assert not shifts.Shift(1.0, 3.6e18).plausible(2.0)
