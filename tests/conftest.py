import sys
from pathlib import Path

# Test helpers (owlproc, display, support) import as top-level modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import os  # noqa: E402

# `owl add`, `owl start` and `owl shift start` start a daemon when none runs;
# in tests that would leave daemons behind, so only the tests of that
# behaviour turn it back on (they stop what they started).
os.environ["OWL_NO_AUTOSTART"] = "1"

# git on the engine thread is a bug (owl.safegit): make it an error here, in
# this process and in every daemon a test starts.
os.environ["OWL_STRICT_THREADS"] = "1"


import pytest  # noqa: E402

from owlproc import make_project  # noqa: E402


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh git repository with one commit, for a test's Jobs."""
    return make_project(tmp_path / "proj")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Where a test's daemon keeps its config, database and logs (OWL_HOME)."""
    return tmp_path / "home"
