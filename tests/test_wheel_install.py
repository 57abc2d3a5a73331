"""Installed by its own name: the wheel, built from a copy of the checkout, in a
fresh virtual environment outside it, with its dependencies from the index.

This is what a Python user does (`python -m build`, then `pip install` or
`pipx install` of the wheel): the distribution is `owl-away` (`owl` on PyPI is
another project), the command is `owl`, and the daemon, `owl add` and `owl
status` work from there. In such an environment there is no PyGObject, so
the tray refuses in one line that says how to install it so it can show.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owlproc import make_project

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parent.parent
BASE_PYTHON = getattr(sys, "_base_executable", None) or sys.executable


def readme_command(needle: str) -> list[str]:
    """The README's own command line that holds `needle`, as words (its comment cut)."""
    [line] = [ln for ln in (ROOT / "README.md").read_text().splitlines() if needle in ln]
    return shlex.split(line.split("#")[0])


def build_wheel(work: Path) -> Path:
    """The wheel built by the README's own command, in a copy of the checkout
    (no tests, no .venv), as from a clean clone: `.venv/bin/python` is this
    test's interpreter, which a fresh `tools/owl` set-up has as well (pip is in
    every venv; `build` only in the test set-up's)."""
    src = work / "src"
    shutil.copytree(
        ROOT / "app",
        src / "app",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    words = readme_command(" -m pip wheel ")
    assert words[0] == ".venv/bin/python", words
    p = subprocess.run(
        [sys.executable, *words[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=src,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    [wheel] = (src / "dist").glob("*.whl")
    # the file the README's pipx line and the macOS recipe name is this one
    assert fnmatch.fnmatch(f"dist/{wheel.name}", readme_command("pipx install --system")[-1])
    mac = (ROOT / "packaging" / "README.md").read_text()
    [named] = re.findall(r"pip install (dist/\S+\.whl)", mac)
    assert fnmatch.fnmatch(f"dist/{wheel.name}", named), named
    return wheel


def test_the_wheel_installs_by_its_own_name_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    t0 = time.monotonic()
    wheel = build_wheel(tmp_path)
    assert wheel.name.startswith("owl_away-"), wheel.name
    venv = tmp_path / "venv"
    subprocess.run([BASE_PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    # Nothing of this checkout on the path: pip would take its metadata for Owl installed.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=clean,
    )
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    owl = str(venv / "bin" / "owl")
    home = tmp_path / "home"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OWL_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(OWL_HOME=str(home), OWL_MACHINE="manual", PATH=f"{venv / 'bin'}:{env['PATH']}")
    project = make_project(tmp_path / "project")
    home.mkdir()
    (home / "config.toml").write_text(
        '[agents.quiet]\ncommand = ["true", "{prompt}"]\n[agent]\ndefault = "quiet"\n'
    )

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [owl, *args],
            cwd=project,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )

    try:
        p = run("daemon", "--detach")
        assert p.returncode == 0 and "running in the background" in p.stdout, p.stderr
        p = run("add", "write", "the", "docs")
        assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
        p = run("status", "--json")
        assert p.returncode == 0, p.stderr
        st = json.loads(p.stdout)
        assert [q["id"] for q in st["queue"]] == [1] and "machine" in st
        # the daemon runs the installed Owl, not this checkout's
        pid = json.loads(run("daemon", "status", "--json").stdout)["pid"]
        assert (
            Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            == str(venv / "bin" / "python").encode()
            or str(venv).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        # no PyGObject here: the tray says how to install Owl so that it can show
        p = run("tray", DISPLAY=":97")
        assert p.returncode == 1
        assert (
            "pipx install --system-site-packages --python /usr/bin/python3 owl-away" in p.stderr
        ), p.stderr
    finally:
        p = run("daemon", "stop")
    assert p.returncode == 0 and "stopped" in p.stdout, p.stdout + p.stderr
    assert run("daemon", "status").returncode == 3
    assert time.monotonic() - t0 < 120
