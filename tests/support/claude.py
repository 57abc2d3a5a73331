"""Where the real Claude Code CLI is, for the tests that run it.

Looked for in this order: `OWL_TEST_CLAUDE` (a path), the cache prefix that
tools/install-claude.sh installs into (`OWL_CLAUDE_PREFIX`, default
~/.cache/owl-test/claude), then PATH.

A test that needs the CLI calls `require_claude()`, which FAILS (not skips)
when it is missing: CI installs it, so a missing CLI is a broken setup, and a
skip would be counted as a pass.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

INSTALL_HINT = (
    "the Claude Code CLI is not installed: run tools/install-claude.sh "
    "(or set OWL_TEST_CLAUDE to the path of a claude executable)"
)


def cache_prefix() -> Path:
    """Where tools/install-claude.sh puts the CLI."""
    prefix = os.environ.get("OWL_CLAUDE_PREFIX")
    return Path(prefix) if prefix else Path.home() / ".cache" / "owl-test" / "claude"


def _runnable(path: str | os.PathLike[str]) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_claude() -> str | None:
    """The path of a claude executable, or None."""
    explicit = os.environ.get("OWL_TEST_CLAUDE")
    if explicit:
        # An explicit choice that is wrong must not quietly fall through to
        # some other claude on PATH.
        return explicit if _runnable(explicit) else None
    cached = cache_prefix() / "bin" / "claude"
    if _runnable(cached):
        return str(cached)
    return shutil.which("claude")


def require_claude() -> str:
    """The path of claude, or fail the calling test saying how to install it."""
    path = find_claude()
    if path is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return path  # type: ignore[return-value]  # pytest.fail does not return
