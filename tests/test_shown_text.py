"""What an agent writes reaches the person as text, never as terminal control.

A real agent script writes escape sequences, carriage returns and bytes that
are not UTF-8 into its output and a commit subject; the real daemon runs it and
the real `owl` command shows the result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from owlproc import OWL, ROOT, OwlDaemon, make_project

NOISY = str(ROOT / "tests" / "agents" / "noisy.py")


def _owl_bytes(d: OwlDaemon, *args: str) -> bytes:
    p = subprocess.run([*OWL, *args], env=d.env, capture_output=True, timeout=30)
    assert p.returncode == 0, (args, p.stderr)
    return p.stdout


def _acts_on_a_terminal(out: bytes) -> bool:
    return any(b in out for b in (b"\x1b", b"\r", b"\x07")) or b"\xff" in out


def test_logs_commits_and_titles_show_controls_as_visible_escapes(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    cfg = {
        "agents": {"noisy": {"command": [sys.executable, NOISY, "{prompt}"]}},
        "agent": {"default": "noisy"},
    }
    with OwlDaemon(tmp_path / "home", cfg) as d:
        job = d.add("paint it \x1b[31mred\x1b[0m", project)
        d.machine("idle")
        shown = d.wait_job(job, "review")
        run_id = shown["runs"][0]["id"]

        raw = _owl_bytes(d, "logs", str(run_id), "--raw")
        log_file = Path(shown["runs"][0].get("log") or d.home / "logs" / f"{run_id}.log")
        assert raw == log_file.read_bytes() and b"\x1b[2J" in raw and b"\xff\xfe" in raw

        text = _owl_bytes(d, "logs", str(run_id))
        assert not _acts_on_a_terminal(text), text
        lines = text.decode("utf-8").splitlines()
        assert "\\x1b[2J\\x1b]0;owned\\x07cleared the screen" in lines
        assert "fine\\rverified: 3 checks passed" in lines  # one line, not two
        assert "bad bytes \ufffd\ufffd here" in lines
        assert "tab\tkept" in lines

        out = _owl_bytes(d, "jobs", "show", str(job))
        assert not _acts_on_a_terminal(out), out
        commits = [x for x in out.decode().splitlines() if x.lstrip().startswith("commit")]
        assert len(commits) == 1, out
        assert "real subject\\r\\x1b[32mverified: 3 checks passed\\x1b[0m" in commits[0]
        assert "paint it \\x1b[31mred" in out.decode()

        page = Path(
            _owl_bytes(d, "jobs", "review", str(job), "--no-open").decode().strip().splitlines()[-1]
        ).read_text()
        assert "\x1b" not in page and "\r" not in page.replace("\r\n", "")
        assert "real subject\\r\\x1b[32mverified" in page

        listed = _owl_bytes(d, "jobs")
        assert b"\x1b" not in listed and b"paint it \\x1b[31mred" in listed
        # JSON keeps the data as it is, escaped by JSON itself
        assert d.json("jobs", "show", str(job))["title"] == "paint it \\x1b[31mred\\x1b[0m"
