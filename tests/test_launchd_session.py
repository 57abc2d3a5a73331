"""The LaunchAgent carries the session launchd would not give Owl.

launchd starts a login item with PATH=/usr/bin:/bin:/usr/sbin:/sbin, no LANG
and its output on /dev/null. These tests render the plist as `owl autostart
on` writes it on macOS, then start the real daemon the way launchd would:
from an empty environment, with the plist's ProgramArguments,
EnvironmentVariables and StandardErrorPath, and check that an agent found
only on the recorded PATH runs and that the daemon's log is in the log folder.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from pathlib import Path

import pytest

from owl.autostart import launchd
from owl.autostart.command import owl_command
from owlproc import AGENT, OwlDaemon, make_project, wait_for

LAUNCHD_PATH = "/usr/bin:/bin"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A login session whose PATH holds an agent nothing else can find."""
    bindir = tmp_path / "my bin"
    bindir.mkdir()
    agent = bindir / "my-agent"
    agent.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{AGENT}' \"$@\"\n")
    agent.chmod(0o755)
    home = tmp_path / "owl"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("OWL_HOME", str(home))
    monkeypatch.setenv("PATH", f"{bindir}:{LAUNCHD_PATH}")
    monkeypatch.setenv("LANG", "en_GB.UTF-8")
    return {"home": home, "bin": bindir}


def test_plist_records_path_lang_and_log_folder(session: dict[str, Path]) -> None:
    written = launchd.enable(["/Applications/Owl.app/Contents/MacOS/Owl"])
    doc = plistlib.loads(written.read_bytes())
    assert doc["EnvironmentVariables"] == {
        "PATH": f"{session['bin']}:{LAUNCHD_PATH}",
        "LANG": "en_GB.UTF-8",
        "OWL_HOME": str(session["home"]),
    }
    log = session["home"] / "logs" / "owl.log"
    assert doc["StandardOutPath"] == doc["StandardErrorPath"] == str(log)
    assert log.parent.is_dir(), "launchd does not create the log folder"
    assert (log.parent.stat().st_mode & 0o777) == 0o700


def test_session_environment_takes_only_what_is_set() -> None:
    env = {
        "PATH": "/opt/homebrew/bin:/usr/bin",
        "LANG": "",
        "HOME": "/Users/me",
        "LC_CTYPE": "UTF-8",
    }
    assert launchd.session_environment(env) == {
        "PATH": "/opt/homebrew/bin:/usr/bin",
        "LC_CTYPE": "UTF-8",
    }


def _as_launchd(doc: dict, extra: dict[str, str], stderr_to_log: bool) -> subprocess.Popen:
    """Start the plist's program the way launchd does, plus `daemon` (no GUI
    here): `env -i PATH=/usr/bin:/bin`, then the plist's EnvironmentVariables."""
    words = [f"{k}={v}" for k, v in {**doc.get("EnvironmentVariables", {}), **extra}.items()]
    if stderr_to_log:
        out = open(doc["StandardErrorPath"], "ab")
    else:
        out = open(os.devnull, "wb")
    with out:
        return subprocess.Popen(
            [
                "/usr/bin/env",
                "-i",
                f"PATH={LAUNCHD_PATH}",
                *words,
                *doc["ProgramArguments"],
                "daemon",
            ],
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )


def _run_one_job(tmp_path: Path, session: dict[str, Path], stderr_to_log: bool) -> dict:
    d = OwlDaemon(
        session["home"],
        config={
            "agents": {"mine": {"command": ["my-agent", "{prompt}"]}},
            "agent": {"default": "mine"},
        },
    )
    written = launchd.enable(owl_command())
    doc = plistlib.loads(written.read_bytes())
    d.proc = _as_launchd(doc, {"OWL_MACHINE": "manual", "PYTHONUNBUFFERED": "1"}, stderr_to_log)
    try:
        wait_for(
            lambda: d.owl("status", "--json").returncode == 0 or d._died(),
            timeout=15,
            what="the daemon to answer",
        )
        assert not d._died(), (session["home"] / "logs" / "owl.log").read_text()
        job = d.add("exit=0", make_project(tmp_path / "proj"))
        d.machine("idle")
        return d.wait_job(job, "review")
    finally:
        d.__exit__(None, None, None)


@pytest.mark.parametrize("stderr_to_log", [True, False], ids=["stderr-in-plist", "stderr-null"])
def test_daemon_from_launchd_finds_the_agent_on_the_recorded_path(
    tmp_path: Path, session: dict[str, Path], stderr_to_log: bool
) -> None:
    job = _run_one_job(tmp_path, session, stderr_to_log)
    assert job["runs"][-1]["outcome"] == "succeeded"
    log = (session["home"] / "logs" / "owl.log").read_text()
    started = [ln for ln in log.splitlines() if "owl daemon" in ln and "started" in ln]
    assert len(started) == 1, log  # logged once, though stderr may be that file too


def test_without_the_recorded_path_the_agent_is_not_found(
    tmp_path: Path, session: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same start with launchd's own PATH: what the plist's PATH fixes."""
    monkeypatch.setenv("PATH", LAUNCHD_PATH)
    d = OwlDaemon(
        session["home"],
        config={
            "agents": {"mine": {"command": ["my-agent", "{prompt}"]}},
            "agent": {"default": "mine"},
        },
    )
    doc = plistlib.loads(launchd.enable(owl_command()).read_bytes())
    d.proc = _as_launchd(doc, {"OWL_MACHINE": "manual"}, True)
    try:
        wait_for(
            lambda: d.owl("status", "--json").returncode == 0 or d._died(),
            timeout=15,
            what="the daemon to answer",
        )
        refused = d.owl("add", "--project", str(make_project(tmp_path / "proj")), "--", "exit=0")
    finally:
        d.__exit__(None, None, None)
    assert refused.returncode == 1
    assert "my-agent was not found on PATH" in refused.stderr


def _stub_shell(tmp_path: Path, path_it_sets: str) -> Path:
    """A login shell that prints a greeting (as rc files do) and sets PATH."""
    shell = tmp_path / "zsh"
    shell.write_text(
        "#!/bin/sh\n"
        f"echo called >> '{tmp_path}/shell-calls'\n"
        "echo 'Welcome back!'\n"
        f"PATH='{path_it_sets}'\n"
        'shift 3; eval "$1"\n'
    )
    shell.chmod(0o755)
    return shell


def test_started_by_launchd_the_login_shells_path_is_recorded(tmp_path: Path) -> None:
    shell = _stub_shell(tmp_path, "/opt/homebrew/bin:/Users/me/.nvm/bin:/usr/bin:/bin")
    env = {"PATH": launchd.LAUNCHD_PATH, "SHELL": str(shell), "LANG": "de_DE.UTF-8"}
    assert launchd.session_environment(env) == {
        "PATH": "/opt/homebrew/bin:/Users/me/.nvm/bin:/usr/bin:/bin",
        "LANG": "de_DE.UTF-8",
    }


def test_from_a_terminal_its_own_path_is_recorded_and_no_shell_asked(tmp_path: Path) -> None:
    shell = _stub_shell(tmp_path, "/elsewhere")
    env = {"PATH": "/opt/homebrew/bin:/usr/bin:/bin", "SHELL": str(shell)}
    assert launchd.session_environment(env) == {"PATH": "/opt/homebrew/bin:/usr/bin:/bin"}
    assert not (tmp_path / "shell-calls").exists()


def test_a_broken_login_shell_keeps_launchds_path(tmp_path: Path) -> None:
    env = {"PATH": launchd.LAUNCHD_PATH, "SHELL": str(tmp_path / "no-such-shell")}
    assert launchd.session_environment(env) == {"PATH": launchd.LAUNCHD_PATH}
