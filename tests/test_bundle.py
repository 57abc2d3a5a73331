"""Owl inside a macOS app bundle, laid out on Linux.

A py2app bundle's `sys.executable` is `Owl.app/Contents/MacOS/python`, which
takes no `-m owl.watchdog` by itself (the bundle's boot script gives it its
packages); briefcase's is the app's own stub. Here a bundle is laid out with
the same shape: Info.plist, a `python` that is this interpreter, and a main
executable that runs `owl.bundle.entry` the way the packaging recipe's script
does. The real daemon runs from it; its watchdog must start through the
bundle's main executable and still end the Runs when the daemon is killed.
"""

from __future__ import annotations

import os
import plistlib
import site
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from owl import bundle
from owlproc import SocketOwl, make_project, wait_for

APP = str(Path(__file__).resolve().parent.parent / "app")


def make_bundle(root: Path, executable: str = "Owl") -> Path:
    app = root / "Owl.app"
    macos = app / "Contents" / "MacOS"
    macos.mkdir(parents=True)
    (app / "Contents" / "Info.plist").write_bytes(plistlib.dumps(
        {"CFBundleExecutable": executable, "CFBundleName": "Owl",
         "CFBundleIdentifier": "dev.owl"}))
    (macos / "python").symlink_to(sys.executable)
    # Like py2app's boot script, the main executable puts the bundle's
    # packages on sys.path inside the process: the bare python has none.
    paths = [*site.getsitepackages(), APP]
    main = macos / executable
    main.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -c '
                    f'"import sys; sys.path[:0] = {paths!r}; '
                    'from owl.bundle import entry; raise SystemExit(entry())" "$@"\n')
    main.chmod(0o755)
    return app


def bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_the_bundles_bare_python_cannot_import_owl(tmp_path: Path) -> None:
    """What the fix is for: `sys.executable -m owl.watchdog` fails in a bundle."""
    app = make_bundle(tmp_path)
    out = subprocess.run([str(app / "Contents" / "MacOS" / "python"), "-m", "owl.watchdog"],
                         capture_output=True, text=True, env=bare_env(), timeout=30, cwd="/")
    assert out.returncode != 0 and "No module named 'owl'" in out.stderr


def test_paths_inside_and_outside_a_bundle(tmp_path: Path) -> None:
    app = make_bundle(tmp_path, executable="OwlMain")
    inner = str(app / "Contents" / "MacOS" / "python")
    assert bundle.app_bundle(inner) == app
    assert bundle.main_executable(app) == app / "Contents" / "MacOS" / "OwlMain"
    assert bundle.module_argv("owl.watchdog", inner) == [
        str(app / "Contents" / "MacOS" / "OwlMain"), "-m", "owl.watchdog"]
    assert bundle.app_bundle("/usr/bin/python3") is None
    assert bundle.module_argv("owl.watchdog", "/usr/bin/python3") == [
        "/usr/bin/python3", "-m", "owl.watchdog"]
    # a folder named .app without Info.plist is not a bundle
    (tmp_path / "x.app" / "bin").mkdir(parents=True)
    assert bundle.app_bundle(str(tmp_path / "x.app" / "bin" / "python")) is None


def test_grantee_names_the_app_the_terminal_or_the_interpreter(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    inner = str(app / "Contents" / "MacOS" / "python")
    assert bundle.grantee({}, inner) == f"Owl ({app})"
    assert bundle.grantee({"TERM_PROGRAM": "Apple_Terminal"}, "/usr/bin/python3") == "Terminal"
    assert bundle.grantee({"TERM_PROGRAM": "iTerm.app"}, "/usr/bin/python3") == "iTerm"
    assert bundle.grantee({}, sys.executable) == \
        f"the Python that runs Owl ({os.path.realpath(sys.executable)})"


def test_main_executable_runs_modules_and_drops_finders_argument(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    main = bundle.main_executable(app)
    env = bare_env()
    out = subprocess.run([str(main), "-psn_0_12345", "-m", "platform", "--terse"],
                         capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0 and "Linux" in out.stdout, out.stderr
    out = subprocess.run([str(main), "--version"], capture_output=True, text=True,
                         env=env, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("owl "), out.stdout + out.stderr


def test_owl_command_inside_a_bundle_is_the_bundles_executable(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    out = subprocess.run([str(app / "Contents" / "MacOS" / "Owl"), "-m", "owl.autostart.command"],
                         capture_output=True, text=True, env=bare_env(), timeout=30)
    assert out.stdout.strip() == repr([str(app / "Contents" / "MacOS" / "Owl")]), out.stderr


class BundledOwl(SocketOwl):
    """The real daemon, started by the bundle's own python."""

    def __init__(self, home: Path, app: Path) -> None:
        super().__init__(home, {"interruption": {"grace_window": "10m"}})
        self.env.pop("PYTHONPATH", None)
        self.app = app

    def start(self, wait: bool = True) -> "BundledOwl":
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([str(bundle.main_executable(self.app)), "daemon"],
                                     env=self.env, stdout=logf, stderr=logf,
                                     stdin=subprocess.DEVNULL, cwd="/")
        logf.close()
        wait_for(lambda: self.socket.exists() and self._up() or self._died(),
                 timeout=15, what="the daemon to answer")
        assert not self._died(), self.log_text()
        return self

    def _up(self) -> bool:
        try:
            self.ask("ping")
            return True
        except Exception:
            return False


def test_the_watchdog_starts_through_the_bundle_and_ends_runs(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    project = make_project(tmp_path / "proj")
    with BundledOwl(tmp_path / "home", app) as d:
        db = str(d.home / "owl.db")
        python = str(app / "Contents" / "MacOS" / "python")

        def guards() -> list[psutil.Process]:
            # the main executable is a script: wait until it has exec'd python
            return [p for p in psutil.Process(d.proc.pid).children()
                    if "owl.watchdog" in p.cmdline() and db in p.cmdline()
                    and p.cmdline()[0] == python]
        wait_for(guards, what="the watchdog, started through the bundle")
        assert len(guards()) == 1, d.log_text()
        cmd = guards()[0].cmdline()
        assert "from owl.bundle import entry" in cmd[2] and cmd[3:5] == ["-m", "owl.watchdog"]
        guard = guards()[0]
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(d.alive_agent_pids, what="the agent to start")
        d.kill()
        wait_for(lambda: d.alive_agent_pids() == [], timeout=10,
                 what="the watchdog to end the Run")
        wait_for(lambda: not guard.is_running(), what="the watchdog to exit")
        d.proc = None
