"""Under CI=true a test that cannot find a tool it needs fails; elsewhere it skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROBE = """
import display
from support.claude import require_claude

def test_display():
    with display.virtual_display(tray=True):
        pass

def test_xdotool():
    display.xdotool({}, "key", "a")

def test_claude():
    require_claude()
"""


def run_probe(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = dict(
        os.environ, PATH=str(empty), OWL_TEST_CLAUDE=str(empty / "claude"), PYTHONPATH=str(HERE)
    )
    env.pop("CI", None)
    if ci is not None:
        env["CI"] = ci
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfs",
            str(tmp_path / "test_probe.py"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return p.stdout


def test_under_ci_missing_xvfb_xdotool_trayer_and_claude_fail(tmp_path):
    out = run_probe(tmp_path, "true")
    assert "3 failed" in out, out
    for word in ("Xvfb", "trayer", "xdotool", "tools/install-claude.sh"):
        assert word in out, (word, out)


def test_on_a_developer_s_machine_missing_tools_skip_but_claude_fails(tmp_path):
    out = run_probe(tmp_path, None)
    assert "1 failed" in out and "2 skipped" in out, out
