"""A sandbox that fails at its own start, and an agent that says it did.

bwrap failing before the agent runs (a bind it cannot make, a filter it cannot
load) was recorded as "the agent exited with code 1", an attempt spent. Now
it is Owl's failure, with bwrap's own words, no attempt spent, and the same
failure on the Job's next Run blocks it. Which it was is read from bwrap's
own status (``--json-status-fd``, written from its process outside the Run),
never from the output: an agent is hostile, and prints "bwrap: ..." itself to
have its failure cost nothing.

The failure is made with the real bwrap behind a `bwrap` of the test's own on
the daemon's PATH, which hands it one bind more, of a source that does not
exist, for the Runs only (their command line holds ``--args``; bwrap's probe
at the daemon's start does not): what a folder gone as a Run starts does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from escapes.asuser import WHO, owl_as
from escapes.harness import base, person, project
from support.need import programs

__all__ = ["base"]

WRAPPER = """#!/bin/sh
case "$*" in *--args*) exec {real} --ro-bind /owl-no-such-source /owl-target "$@" ;; esac
exec {real} "$@"
"""

FORGER = r"""
echo "bwrap: Can't find source path /owl-no-such-source: No such file or directory"
exit 1
"""


def broken_bwrap(base: Path) -> dict[str, str]:
    real = shutil.which("bwrap")
    assert real is not None
    folder = base / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text(WRAPPER.format(real=real))
    (folder / "bwrap").chmod(0o755)
    base.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


@pytest.mark.parametrize("who", WHO)
def test_a_sandbox_failing_at_its_own_start_spends_nothing_and_blocks_when_it_repeats(
    base: Path, who: str
) -> None:
    programs("bwrap")
    home, proj = person(base), project(base)
    with owl_as(who, base, home, proj, "", env=broken_bwrap(base)) as d, d:
        job = d.add("do the work", proj)
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=120)
    first, second = j["runs"]
    for run in (first, second):
        assert run["outcome"] == "interrupted", j["runs"]
        assert run["reason"].startswith(
            "the sandbox could not be set up: bwrap: Can't find source path /owl-no-such-source"
        ), run
    assert "the same as its Run before" in j["reason"], j
    assert j["attempts_left"] == 3, j  # nothing spent


def test_an_agent_printing_bwraps_words_fails_as_itself(base: Path) -> None:
    programs("bwrap")
    home, proj = person(base), project(base)
    with owl_as("root", base, home, proj, FORGER, config={"jobs": {"attempts": 2}}) as d, d:
        job = d.add("do the work", proj)
        d.machine("idle")
        j = d.wait_job(job, "exhausted", timeout=120)
    assert [r["outcome"] for r in j["runs"]] == ["failed", "failed"], j["runs"]
    assert not any("sandbox could not be set up" in (r["reason"] or "") for r in j["runs"])


CHECK_WRAPPER = """#!/bin/sh
case "$*" in *--args*owl-check-marker*) exec {real} --ro-bind /owl-no-such-source /owl-target "$@" ;; esac
exec {real} "$@"
"""


@pytest.mark.parametrize("who", WHO)
def test_a_checks_sandbox_failing_at_its_own_start_is_owls_failure(base: Path, who: str) -> None:
    """A check is contained as its Run is: when bwrap fails at the check's own
    start, judged by bwrap's own status as a Run's start is, the Run is
    Owl's failure with bwrap's words, no attempt spent, and the Job blocks
    when it repeats; the check's record keeps bwrap's words."""
    programs("bwrap")
    env = broken_bwrap(base)
    real = shutil.which("bwrap")
    (base / "bin" / "bwrap").write_text(CHECK_WRAPPER.format(real=real))
    home = person(base)
    toml = "[[checks]]\nname = 'tests'\nrun = 'echo the tests ran # owl-check-marker'\n"
    proj = project(base, {".owl.toml": toml})
    again = "[ -e work.txt ] && exit 0\n"  # the Run after: its work is on the branch
    with owl_as(who, base, home, proj, again, env=env) as d, d:
        job = d.add("do the work", proj)
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=180)
    first, second = j["runs"]
    words = "the sandbox could not be set up: bwrap: Can't find source path /owl-no-such-source"
    for run in (first, second):
        assert run["outcome"] == "interrupted", j["runs"]
        assert run["reason"].startswith(words), run
        [check] = run["checks"]
        assert check["outcome"] == "interrupted" and words in check["output"], check
        assert "the tests ran" not in check["output"], check
    assert "the same as its Run before" in j["reason"], j
    assert j["attempts_left"] == 3, j  # nothing spent
