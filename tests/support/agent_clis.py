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
from pathlib import Path

import pytest


def find(name: str) -> str | None:
    explicit = os.environ.get(f"OWL_TEST_{name.upper()}")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    root = os.environ.get("OWL_AGENTS_PREFIX")
    cached = (Path(root) if root else Path.home() / ".cache" / "owl-test") / name / "bin" / name
    if os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which(name)


def require(name: str) -> str:
    path = find(name)
    if path is None:
        pytest.fail(
            f"the {name} CLI is not installed: run tools/install-agents.sh (or set "
            f"OWL_TEST_{name.upper()} to its path)",
            pytrace=False,
        )
    return path  # type: ignore[return-value]
