"""Where the real Codex, Gemini, OpenCode, Copilot and pi CLIs and aider are, for
the tests that run them.

Looked for like Claude Code (tests/support/claude.py): `OWL_TEST_CODEX` /
`OWL_TEST_GEMINI` / `OWL_TEST_OPENCODE` / `OWL_TEST_COPILOT` / `OWL_TEST_PI` / `OWL_TEST_AIDER` (a path), then the prefix tools/install-agents.sh installs
into (`OWL_AGENTS_PREFIX`, default ~/.cache/owl-test), then PATH. A missing
CLI FAILS the test that needs it: CI installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import need


def find(name: str) -> str | None:
    explicit = os.environ.get(f"OWL_TEST_{name.upper()}")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    root = os.environ.get("OWL_AGENTS_PREFIX")
    cached = (Path(root) if root else Path.home() / ".cache" / "owl-test") / name / "bin" / name
    if os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which(name)


def no_python_for_aider() -> str | None:
    """Why aider cannot be installed here (it needs Python 3.10 to 3.12, and
    Debian 13 has 3.13), or None when a Python it accepts exists."""
    if os.environ.get("OWL_AIDER_PYTHON"):
        return None
    for exe in ("python3.12", "python3.11", "python3.10", "python3"):
        found = shutil.which(exe)
        if found is None:
            continue
        probe = subprocess.run(
            [
                found,
                "-c",
                "import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))",
            ],
            capture_output=True,
        )
        if probe.returncode == 0:
            return None
    return "aider needs Python 3.10 to 3.12 and this machine has none (OWL_AIDER_PYTHON names one)"


def require(name: str) -> str:
    path = find(name)
    if path is None and name == "aider" and (why := no_python_for_aider()):
        need.missing(why)  # a skip that says why, on a developer's machine; fails under CI
    if path is None:
        pytest.fail(
            f"the {name} CLI is not installed: run tools/install-agents.sh (or set "
            f"OWL_TEST_{name.upper()} to its path)",
            pytrace=False,
        )
    return path  # type: ignore[return-value]
