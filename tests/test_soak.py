"""A one-minute soak of the real daemon (bench/soak.py runs the ten-minute one).

Jobs that finish, fail, trap SIGTERM and start setsid children, under random
bursts of input and quiet spells; afterwards no process of any Run is left,
every Job is final or pending, every Run is closed, the database checks ok,
and the daemon's memory and open files stayed flat.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "owl_bench_soak", Path(__file__).resolve().parent.parent / "bench" / "soak.py"
)
assert _spec is not None and _spec.loader is not None
soak_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak_mod)


@pytest.mark.slow  # a minute by design
def test_one_minute_soak(tmp_path: Path) -> None:
    figures = soak_mod.soak(minutes=1.0, jobs=80, workdir=tmp_path, seed=7)
    print(json.dumps(figures, indent=2))
    print(f"daemon RSS: start {figures['rss_start_mb']} MB, end {figures['rss_end_mb']} MB")
    assert figures["problems"] == []
    outcomes = figures["run_outcomes"]
    # the day really had all of it: successes, failures and interruptions
    assert outcomes.get("succeeded/exit", 0) > 0
    assert outcomes.get("failed/exit", 0) > 0
    assert sum(n for k, n in outcomes.items() if k.startswith("interrupted/")) > 0
    assert figures["bursts"] > 0 and figures["quiet_spells"] > 0
    assert figures["orphans"] == 0 and figures["integrity"] == "ok"
