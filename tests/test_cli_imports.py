"""What the hot `owl` calls import: their own verb, and nothing heavy.

`owl --version`, `owl status` and `owl add` are what scripts and people run
most, and an interpreter's start is most of what they cost; each verb builds
its own parser and imports its own module only (`owl.cli.parser`). Each call
here runs in a fresh interpreter against a real daemon, and what it imported
(its `sys.modules`, less what the bare interpreter already holds) must hold
none of the heavy modules: the other verbs' modules (the whole parser), the
database, the engine, the config loader, process and logging machinery.
`bench/cli_speed.py` measures what this costs; this keeps it so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project

PROBE = """
import json, sys
before = set(sys.modules)
from owl.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "imported": sorted(set(sys.modules) - before)}))
"""

VERB_MODULES = {
    "owl.cli.add",
    "owl.cli.agents",
    "owl.cli.carry",
    "owl.cli.completion",
    "owl.cli.daemonctl",
    "owl.cli.db",
    "owl.cli.docs",
    "owl.cli.jobs",
    "owl.cli.jobview",
    "owl.cli.logs",
    "owl.cli.notify",
    "owl.cli.setup",
    "owl.cli.spawn",
    "owl.cli.status",
    "owl.cli.work",
}

# Heavy for any of these calls: the database, the engine and what runs
# processes, the config loader (the daemon reads the config, not the CLI),
# and the stdlib modules only those need.
HEAVY = (
    "sqlite3",
    "psutil",
    "tomllib",
    "owl.store",
    "owl.engine",
    "owl.daemon",
    "owl.tree",
    "owl.git",
    "owl.agents",
    "owl.verbs",
    "owl.settings.config",
    "owl.rules.jobtable",
    "owl.logsafe",
    "subprocess",
    "logging",
    "dataclasses",
    "difflib",
    "shtab",
    "_strptime",  # (timefmt.parse_iso reads by hand)
    "datetime",
    "owl.control.locate",  # the home's lock is read only when nobody answers
    "owl.settings.daemonlock",
    "socket",  # the client speaks through _socket (see owl.control.client)
    "selectors",
)

# Not heavy for every verb, but more than `owl status` or `owl add` may pay
# for finding the socket: typing, pathlib (with urllib) and tempfile came to
# 10 ms of a call whose interpreter starts in 9, platformdirs brings them all.
PATH_MACHINERY = (
    "typing",
    "pathlib",
    "tempfile",
    "shutil",
    "platformdirs",
    "owl.settings.paths",
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("imports")
    with OwlDaemon(root / "home") as d:
        d.project = make_project(root / "proj")  # type: ignore[attr-defined]
        d.machine("input")  # nothing the calls queue starts
        yield d


def imported(d: OwlDaemon, *args: str) -> list[str]:
    """The modules `owl ARGS` imports in a fresh interpreter; it must succeed."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["code"] in (0, None), (args, out["code"], p.stderr)
    names: list[str] = out["imported"]
    return names


def heavy(names: list[str], allowed: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    return sorted(
        n
        for n in names
        if any(n == h or n.startswith(h + ".") for h in HEAVY + PATH_MACHINERY)
        or (n in VERB_MODULES and n not in allowed)
    )


def test_version_imports_neither_argparse_nor_any_verb(daemon: OwlDaemon) -> None:
    names = imported(daemon, "--version")
    assert set(names) <= {"owl", "owl.cli", "__future__"}, names


def test_status_imports_its_own_verb_and_nothing_heavy(daemon: OwlDaemon) -> None:
    names = imported(daemon, "status", "--json")
    assert "owl.cli.status" in names and "owl.control.client" in names  # it did ask
    assert heavy(names, {"owl.cli.status", "owl.cli.carry"}) == []


def test_status_text_imports_nothing_heavy_either(daemon: OwlDaemon) -> None:
    names = imported(daemon, "status")
    assert heavy(names, {"owl.cli.status", "owl.cli.carry"}) == []


def test_add_imports_its_own_verb_and_nothing_heavy(daemon: OwlDaemon) -> None:
    project = Path(daemon.project)  # type: ignore[attr-defined]
    names = imported(daemon, "add", "--project", str(project), "sleep=60 imports")
    assert "owl.cli.add" in names
    assert heavy(names, {"owl.cli.add", "owl.cli.spawn"}) == []
    assert len(daemon.json("jobs")) == 1  # the Job was queued: the call went through


def test_jobs_list_imports_nothing_heavy(daemon: OwlDaemon) -> None:
    names = imported(daemon, "jobs")
    assert heavy(names, {"owl.cli.jobs", "owl.cli.carry"}) == []


def test_the_check_sees_a_heavy_import(daemon: OwlDaemon) -> None:
    # `owl db check` reads the database itself: it must show up as heavy here
    names = imported(daemon, "db", "check")
    assert "sqlite3" in heavy(names, {"owl.cli.db"})


def test_status_finds_the_default_socket_without_platformdirs(tmp_path: Path) -> None:
    """No OWL_HOME: the daemon at platformdirs' places, and `owl status`
    reaching it through a private XDG_RUNTIME_DIR without importing them."""
    home, runtime = tmp_path / "h", tmp_path / "rt"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    d = OwlDaemon(tmp_path / "unused")
    env = {k: v for k, v in d.env.items() if k != "OWL_HOME" and not k.startswith("XDG_")}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    owl = [sys.executable, "-m", "owl"]
    up = subprocess.run([*owl, "daemon", "--detach"], env=env, capture_output=True, timeout=60)
    assert up.returncode == 0, up.stderr
    try:
        assert (runtime / "owl" / "owl.sock").is_socket()
        p = subprocess.run(
            [sys.executable, "-c", PROBE, "status", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout.splitlines()[-1])
        assert out["code"] in (0, None)
        assert heavy(out["imported"], {"owl.cli.status", "owl.cli.carry"}) == []
    finally:
        down = subprocess.run([*owl, "daemon", "stop"], env=env, capture_output=True, timeout=60)
        assert down.returncode == 0, down.stderr
