"""Property-based tests of the config loader over generated TOML documents.

Whatever a person (or a fuzzer) writes into config.toml, loading it ends in
exactly one of two ways: a checked Config, or a ConfigError whose message is
one line and names the file and, when a key is at fault, that key. Never
another exception: a daemon that meets a bad file keeps the last good one and
says why, and it can only do that if the loader never blows up.
"""

from __future__ import annotations

import datetime as dt
import math
import string
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from owl.rules import bounds
from owl.settings import config as configmod
from owl.settings import keys as configkeys

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SECTIONS = [*configkeys.SCHEMA, "agents", "projects"]
KEYS = sorted(
    {k for keys in configkeys.SCHEMA.values() for k in keys}
    | set(configkeys.AGENT_KEYS)
    | set(configkeys.PROJECT_KEYS)
)

# ------------------------------------------------------------- strategies

names = st.one_of(
    st.sampled_from(SECTIONS + KEYS + ["claude", "script", "x"]), st.text(min_size=1, max_size=12)
)
durations = st.one_of(
    st.from_regex(r"\A(\d{1,4}(\.\d{1,3})?(ms|s|m|h|d)){1,3}\Z"),
    st.sampled_from(
        [
            "0s",
            "10",
            "1x",
            "-5m",
            "1h30",
            " 5 m ",
            "",
            "1e9h",
            "9" * 400 + "h",
            "0.0ms",
            "5m5m",
            "NaN",
            "inf s",
        ]
    ),
)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    durations,
    st.sampled_from(["~", "~nosuchuser/x", "~/proj", "/", "owl/", "../../x", "a\nb", "{prompt}"]),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 1, 1)),
    st.dates(),
    st.times(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=12,
)
# Documents shaped like a config: known sections and keys most of the time,
# with values of any type; sometimes junk everywhere.
agent_tables = st.dictionaries(
    names,
    st.dictionaries(
        st.one_of(st.sampled_from(list(configkeys.AGENT_KEYS)), names),
        st.one_of(st.lists(st.text(max_size=10), max_size=4), values),
        max_size=3,
    ),
    max_size=3,
)
project_tables = st.dictionaries(
    st.one_of(
        st.sampled_from(["~", "~nosuchuser/p", "/tmp/p", "rel/p", "", "~/p"]), st.text(max_size=12)
    ),
    st.dictionaries(
        st.one_of(st.sampled_from(list(configkeys.PROJECT_KEYS)), names), values, max_size=3
    ),
    max_size=3,
)


@st.composite
def documents(draw) -> dict:
    doc: dict = {}
    for section in draw(st.lists(st.sampled_from(SECTIONS), max_size=len(SECTIONS), unique=True)):
        if section == "agents":
            doc[section] = draw(st.one_of(agent_tables, values))
        elif section == "projects":
            doc[section] = draw(st.one_of(project_tables, values))
        else:
            keys = list(configkeys.SCHEMA[section])
            doc[section] = draw(
                st.one_of(
                    st.dictionaries(
                        st.one_of(st.sampled_from(keys), names),
                        st.one_of(durations, values),
                        max_size=4,
                    ),
                    values,
                )
            )
    if draw(st.booleans()):
        doc.update(draw(st.dictionaries(names, values, max_size=2)))
    return doc


def dump(doc: dict) -> str | None:
    try:
        return tomli_w.dumps(doc)
    except (TypeError, ValueError):
        return None  # not representable in TOML (e.g. a top-level scalar)


def keys_in(doc: object, prefix: str = "") -> set[str]:
    """Every dotted path and every single name in the document."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            out |= {str(k), path}
            out |= keys_in(v, path)
    return out


def check_outcome(path: Path, doc: dict | None) -> None:
    try:
        cfg = configmod.load(path)
    except configmod.ConfigError as e:
        msg = str(e)
        assert msg and "\n" not in msg and "\r" not in msg, repr(msg)
        assert msg.startswith(str(path)), msg
        if doc is not None and "not valid TOML" not in msg:
            # the message names what is wrong: a key path, or a section/agent/project name
            named = [k for k in keys_in(doc) if k and configmod.one_line(k) in msg]
            assert named, msg
        return
    assert isinstance(cfg, configmod.Config)
    # a loaded config is sane
    assert cfg.idle_after > 0 and cfg.grace_window > 0 and cfg.timeout > 0 and cfg.stall > 0
    assert all(math.isfinite(x) for x in (cfg.idle_after, cfg.grace_window, cfg.timeout, cfg.stall))
    assert 0 <= cfg.nice <= 19 and cfg.max_parallel >= 1 and cfg.attempts >= 1
    assert ".." not in cfg.branch_prefix and not cfg.branch_prefix.startswith("/")
    assert "\n" not in cfg.branch_prefix
    assert cfg.default_agent in configkeys.BUILTIN_AGENTS or cfg.default_agent in cfg.agents
    # and what `owl config show` prints from it loads back to the same config
    again = configmod.from_dict(configmod.effective_document(cfg), "shown")
    for attr in ("idle_after", "grace_window", "timeout", "stall"):
        assert math.isclose(
            getattr(again, attr), getattr(cfg, attr), rel_tol=1e-3, abs_tol=0.001
        ), attr
    for attr in (
        "require_ac_power",
        "max_parallel",
        "nice",
        "keep_awake",
        "attempts",
        "branch_prefix",
        "default_agent",
    ):
        assert getattr(again, attr) == getattr(cfg, attr), attr


# ------------------------------------------------------------------ tests


@FUZZ
@given(doc=documents())
@example(doc={"projects": {"~nosuchuser/p": {"max_parallel": 1}}})
@example(doc={"jobs": {"branch_prefix": "owl/\n"}})
@example(doc={"idle": {"after": "9" * 400 + "h"}})
@example(doc={"runs": {"nice": 2**63 - 1, "max_parallel": 0}})
@example(doc={"agents": {"x": {"command": []}}, "agent": {"default": "x"}})
@example(doc={"agents": {"claude": {"path": ""}}})
def test_any_document_loads_or_fails_in_one_line_naming_the_key(tmp_path: Path, doc: dict) -> None:
    text = dump(doc)
    assume(text is not None)
    path = tmp_path / "config.toml"
    path.write_text(text, "utf-8")
    check_outcome(path, tomllib.loads(text))


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=200),
        st.text(alphabet=string.printable, max_size=200),
        st.binary(max_size=200),
    )
)
@example(text='[idle]\nafter = "1s"\n[idle]\n')
@example(text="[idle\n")
@example(text=b"\xff\xfe[idle]")
@example(text="x = 1\n" * 3)
def test_any_bytes_load_or_fail_in_one_line_naming_the_file(
    tmp_path: Path, text: str | bytes
) -> None:
    path = tmp_path / "config.toml"
    try:
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    except UnicodeEncodeError:
        return
    try:
        doc = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        doc = None
    check_outcome(path, doc)


# within every duration's bounds (the tightest is a day)
valid_durations = st.one_of(
    st.builds(lambda n, u: f"{n}{u}", st.integers(1, 10_000), st.sampled_from(["ms", "s"])),
    st.builds(lambda n: f"{n}m", st.integers(1, 1440)),
    st.builds(lambda n: f"{n}h", st.integers(1, 24)),
)
valid_docs = st.fixed_dictionaries(
    {},
    optional={
        "idle": st.fixed_dictionaries(
            {}, optional={"after": valid_durations, "require_ac_power": st.booleans()}
        ),
        "interruption": st.fixed_dictionaries({}, optional={"grace_window": valid_durations}),
        "runs": st.fixed_dictionaries(
            {},
            optional={
                "max_parallel": st.integers(1, bounds.max_parallel()),
                "timeout": valid_durations,
                "stall": valid_durations,
                "nice": st.integers(0, 19),
            },
        ),
        "power": st.fixed_dictionaries({}, optional={"keep_awake": st.booleans()}),
        "jobs": st.fixed_dictionaries(
            {},
            optional={
                "attempts": st.integers(1, 100),
                "branch_prefix": st.from_regex(r"\A[a-z][a-z0-9_-]{0,8}/\Z"),
            },
        ),
        "agents": st.dictionaries(
            st.from_regex(r"\A[a-z]{1,8}\Z"),
            st.fixed_dictionaries(
                {
                    "command": st.lists(
                        st.text(alphabet=string.ascii_letters + " {}-=", max_size=8),
                        min_size=1,
                        max_size=4,
                    )
                }
            ),
            max_size=2,
        ),
    },
)


@FUZZ
@given(doc=valid_docs)
def test_every_valid_document_loads(tmp_path: Path, doc: dict) -> None:
    path = tmp_path / "config.toml"
    path.write_text(tomli_w.dumps(doc), "utf-8")
    cfg = configmod.load(path)
    for section, body in doc.items():
        if section == "agents":
            for name, spec in body.items():
                assert cfg.agent(name)["command"] == spec["command"]
            continue
        for key, value in body.items():
            got = getattr(cfg, configmod._FIELDS[(section, key)])
            if configkeys.SCHEMA[section][key].kind == "duration":
                assert got == pytest.approx(configmod.parse_duration(value))
            else:
                assert got == value


@FUZZ
@given(seconds=st.floats(min_value=0.001, max_value=10**7, allow_nan=False))
def test_format_duration_reads_back(seconds: float) -> None:
    back = configmod.parse_duration(configmod.format_duration(seconds))
    assert back == pytest.approx(seconds, abs=0.5 if seconds >= 1 else 0.0005)


@FUZZ
@given(section=st.sampled_from(list(configkeys.SCHEMA)), data=st.data())
def test_set_value_never_writes_a_bad_file(tmp_path: Path, section: str, data) -> None:
    """`config.set_value` checks before it writes: a bad value leaves the file as it was."""
    path = tmp_path / "config.toml"
    path.write_text('[idle]\nafter = "5m"\n')
    before = path.read_bytes()
    key = data.draw(st.sampled_from(list(configkeys.SCHEMA[section])))
    value = data.draw(
        st.one_of(
            durations,
            scalars.filter(lambda v: not isinstance(v, (dt.datetime, dt.date, dt.time)) or True),
        )
    )
    try:
        configmod.set_value(path, section, key, value)
    except configmod.ConfigError as e:
        assert "\n" not in str(e) and f"{section}.{key}" in str(e)
        assert path.read_bytes() == before
        return
    except (TypeError, ValueError) as e:  # tomli-w cannot write it: nothing written
        assert not isinstance(e, configmod.ConfigError)
        assert path.read_bytes() == before
        return
    assert configmod.load(path) is not None
