"""The shape the code keeps: what the CLI and `views` may import, and the engine's size.

The `owl` command and the views it formats must not bring in anything that
starts or signals processes (a CLI that imports the process-tree code could
stop something by mistake, and pays for it on every call). Checked in a fresh
interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app" / "owl"

# Modules that start, signal or supervise processes (git included).
FORBIDDEN = ("owl.tree", "owl.engine", "owl.daemon", "owl.setup", "owl.checks",
             "owl.workspace", "owl.safegit", "owl.carryon", "owl.verbwork", "owl.runstart",
             "subprocess")

PROBE = """
import importlib, json, pkgutil, sys
import owl.cli, owl.views
for m in pkgutil.iter_modules(owl.cli.__path__):
    importlib.import_module("owl.cli." + m.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_cli_and_views_import_nothing_that_runs_processes() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    loaded = json.loads(out)
    assert "owl.views" in loaded and "owl.cli.status" in loaded     # the probe did import them
    bad = sorted(m for m in loaded
                 if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert bad == [], f"importing owl.cli and owl.views brought in {bad}"


def test_cli_takes_no_private_names_from_the_daemon() -> None:
    taken = []
    for path in sorted((APP / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "owl.daemon":
                taken += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert taken == []


def test_engine_stays_small() -> None:
    lines = len((APP / "engine.py").read_text().splitlines())
    assert lines < 420, f"engine.py has {lines} lines"
