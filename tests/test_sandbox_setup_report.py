"""Reading a start that failed at bwrap's own set-up: netns.py's report, bwrap's words."""

from __future__ import annotations

from pathlib import Path

from owl.engine.containing import setup_failed


def test_no_report_is_no_failure_of_the_sandboxs(tmp_path: Path) -> None:
    assert setup_failed(tmp_path / "1.setup", ["bwrap: forged by the agent"], 1) is None


def test_bwraps_own_line_is_the_reason_and_the_report_is_removed(tmp_path: Path) -> None:
    report = tmp_path / "1.setup"
    report.write_text("bwrap could not set up the sandbox (exit 1)")
    lines = [
        "owl: no user-mode networking (...)",
        "bwrap: Can't find source path /gone: No such file",
    ]
    assert setup_failed(report, lines, 1) == lines[1]
    assert not report.exists()


def test_without_a_line_of_bwraps_the_report_says_it(tmp_path: Path) -> None:
    report = tmp_path / "1.setup"
    report.write_text("bwrap could not set up the sandbox (exit 1)")
    assert setup_failed(report, [], 1) == "bwrap could not set up the sandbox (exit 1)"
    report.write_text("x")
    assert setup_failed(report, ["x" * 400], 1).endswith("...")
