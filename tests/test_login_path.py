"""Owl.app started by launchd asks the login shell for PATH; a shell that gives
none says so in `owl status`, naming what was tried, with what it printed.

launchd's environment is stood in for as the existing macOS tests do: its own
PATH (/usr/bin:/bin:/usr/sbin:/sbin), and login shells that are stubs doing
what real rc files do (exec tmux, leave a background job holding the output,
print a greeting). The processes are real."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
from owl.autostart import launchd
from owl.cli.status import _status_text
from owl.verbs import statusdoc
from owlproc import wait_for


def shell(tmp_path: Path, body: str) -> Path:
    """A login shell: `$SHELL -l -i -c SCRIPT` runs its rc `body`, then SCRIPT."""
    sh = tmp_path / "zsh"
    sh.write_text(f"#!/bin/sh\necho $$ > '{tmp_path}/pid'\n{body}\nshift 3; eval \"$1\"\n")
    sh.chmod(0o755)
    return sh


def launchd_env(sh: Path) -> dict[str, str]:
    return {"PATH": launchd.LAUNCHD_PATH, "SHELL": str(sh), "HOME": "/Users/me"}


def gone(tmp_path: Path) -> bool:
    pid = int((tmp_path / "pid").read_text())
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_rc_file_that_execs_tmux_is_bounded_and_what_it_printed_kept(tmp_path):
    sh = shell(tmp_path, "echo 'starting tmux...'\nexec sleep 60")
    read = launchd.read_login_path(launchd_env(sh), timeout=0.5)
    assert read.path is None and read.why == "did not answer within 0.5 s"
    assert "starting tmux..." in read.said and str(sh) in read.tried and "-l -i" in read.tried
    wait_for(lambda: gone(tmp_path), what="the shell (now the sleep) killed")


def test_a_background_job_holding_the_output_past_the_bound_does_not_lose_the_path(tmp_path):
    sh = shell(
        tmp_path,
        "sleep 60 &\necho $! > '" + str(tmp_path) + "/job'\nPATH=/opt/homebrew/bin:/usr/bin",
    )
    read = launchd.read_login_path(launchd_env(sh), timeout=0.5)
    assert read.path == "/opt/homebrew/bin:/usr/bin" and read.why is None
    job = int((tmp_path / "job").read_text())
    wait_for(
        lambda: not psutil.pid_exists(job) or psutil.Process(job).status() == psutil.STATUS_ZOMBIE,
        what="the background job ended with the shell's session",
    )


def test_a_shell_that_prints_no_path_or_cannot_start_says_so(tmp_path):
    sh = shell(tmp_path, "echo 'Welcome back!'\nexit 0")
    read = launchd.read_login_path(launchd_env(sh))
    assert read.path is None and read.why == "printed no PATH" and "Welcome back!" in read.said
    missing = launchd.read_login_path(launchd_env(tmp_path / "no-shell"))
    assert missing.path is None and missing.why and missing.why.startswith("could not start")


def test_owl_status_says_the_path_read_failed_and_names_what_was_tried(tmp_path, monkeypatch):
    sh = shell(tmp_path, "echo 'starting tmux...'\nexec sleep 60")
    monkeypatch.setattr(launchd, "LOGIN_SHELL_TIMEOUT", 0.5)
    env = launchd_env(sh)
    path, source = launchd.mend_path(env, "darwin")
    assert path == launchd.LAUNCHD_PATH and "did not answer within 0.5 s" in source
    monkeypatch.setenv("PATH", path)
    view = statusdoc.login_path_view()
    assert view is not None and view["why"] == "did not answer within 0.5 s"
    st = {
        "machine": {"idle": False, "idle_for_s": 0, "on_ac_power": True, "reason": "in use",
                    "detectors": ["quartz"]},
        "paused": False, "shift": None, "runs": [], "queue": [], "login_path": view,
    }  # fmt: skip
    lines = _status_text(st).splitlines()
    assert lines[0].startswith("PATH:") and str(sh) in lines[0]
    assert launchd.LAUNCHD_PATH in lines[0] and "did not answer within 0.5 s" in lines[0]
    assert "it printed: starting tmux..." in lines[1]

    good = shell(tmp_path, "PATH=/opt/homebrew/bin:/usr/bin")
    assert launchd.mend_path(launchd_env(good), "darwin")[0] == "/opt/homebrew/bin:/usr/bin"
    assert statusdoc.login_path_view() is None  # answered: nothing to say
    assert os.environ["PATH"] == path


def test_under_a_user_manager_the_login_shells_path_comes_first(tmp_path):
    """systemd's user manager gives its services its own PATH, without the
    ~/.local/bin a person's ~/.profile adds (where Claude Code's installer puts
    `claude`): the daemon takes the login shell's first, the manager's after."""
    manager = "/usr/local/bin:/usr/bin:/bin:/usr/games"
    sh = shell(tmp_path, 'PATH="/home/me/.local/bin:/usr/bin:/bin"')
    env = {"PATH": manager, "SHELL": str(sh), "HOME": "/home/me", "MANAGERPID": "1234"}
    path, source = launchd.mend_path(env, "linux")
    assert path == "/home/me/.local/bin:/usr/bin:/bin:/usr/local/bin:/usr/games"
    assert env["PATH"] == path and source.startswith(f"from the login shell {sh}")
    assert f"the user manager gave {manager}" in source
    # started from a terminal (no manager): the terminal's PATH is the person's
    plain = {"PATH": manager, "SHELL": str(sh), "HOME": "/home/me"}
    assert launchd.mend_path(plain, "linux") == (manager, "inherited")
    # a shell that answers nothing: the manager's PATH, and why
    broken = shell(tmp_path, "exit 3")
    env = {"PATH": manager, "SHELL": str(broken), "MANAGERPID": "1234"}
    path, source = launchd.mend_path(env, "linux")
    assert path == manager and source.startswith("the user manager's; the login shell")
