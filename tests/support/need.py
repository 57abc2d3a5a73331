"""A test that cannot find a tool it needs: a skip on a developer's own
machine, a failure under CI (``CI=true``), where the set-up installs every
tool and a skip would be counted as a pass."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(why: str) -> NoReturn:
    """Fail (under CI) or skip (elsewhere) the calling test, saying why."""
    if under_ci():
        pytest.fail(f"{why} (CI=true: a missing tool fails; run tools/setup.sh)", pytrace=False)
    pytest.skip(why)


def programs(*names: str) -> None:
    """Each of these programs must be on PATH, or the test cannot run."""
    absent = [n for n in names if shutil.which(n) is None]
    if absent:
        missing(f"not installed: {', '.join(absent)}")
