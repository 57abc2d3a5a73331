"""Owl inside a macOS app bundle, laid out on Linux.

A py2app bundle's `sys.executable` is `Owl.app/Contents/MacOS/python`, which
takes no `-m owl.daemon.watchdog` by itself (the bundle's boot script gives it its
packages); briefcase's is the app's own stub. Here a bundle is laid out with
the same shape: Info.plist, a `python` that is this interpreter, and a main
executable that runs `owl.cli.bundled.entry` the way the packaging recipe's script
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

from owl import bundle
from owlproc import SocketOwl, make_project, wait_for

APP = str(Path(__file__).resolve().parent.parent / "app")


def make_bundle(root: Path, executable: str = "Owl") -> Path:
    app = root / "Owl.app"
    macos = app / "Contents" / "MacOS"
    macos.mkdir(parents=True)
    (app / "Contents" / "Info.plist").write_bytes(
        plistlib.dumps(
            {
                "CFBundleExecutable": executable,
                "CFBundleName": "Owl",
                "CFBundleIdentifier": "dev.owl",
            }
        )
    )
    (macos / "python").symlink_to(sys.executable)
    # Like py2app's boot script, the main executable puts the bundle's
    # packages on sys.path inside the process: the bare python has none.
    paths = [*site.getsitepackages(), APP]
    main = macos / executable
    main.write_text(
        '#!/bin/sh\nexec "$(dirname "$0")/python" -c '
        f'"import sys; sys.path[:0] = {paths!r}; '
        'from owl.cli.bundled import entry; raise SystemExit(entry())" "$@"\n'
    )
    main.chmod(0o755)
    return app


def bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_the_bundles_bare_python_cannot_import_owl(tmp_path: Path) -> None:
    """What the fix is for: `sys.executable -m owl.daemon.watchdog` fails in a bundle."""
    app = make_bundle(tmp_path)
    out = subprocess.run(
        [str(app / "Contents" / "MacOS" / "python"), "-m", "owl.daemon.watchdog"],
        capture_output=True,
        text=True,
        env=bare_env(),
        timeout=30,
        cwd="/",
    )
    assert out.returncode != 0 and "No module named 'owl'" in out.stderr


def test_paths_inside_and_outside_a_bundle(tmp_path: Path) -> None:
    app = make_bundle(tmp_path, executable="OwlMain")
    inner = str(app / "Contents" / "MacOS" / "python")
    assert bundle.app_bundle(inner) == app
    assert bundle.main_executable(app) == app / "Contents" / "MacOS" / "OwlMain"
    assert bundle.module_argv("owl.daemon.watchdog", inner) == [
        str(app / "Contents" / "MacOS" / "OwlMain"),
        "-m",
        "owl.daemon.watchdog",
    ]
    assert bundle.app_bundle("/usr/bin/python3") is None
    assert bundle.module_argv("owl.daemon.watchdog", "/usr/bin/python3") == [
        "/usr/bin/python3",
        "-m",
        "owl.daemon.watchdog",
    ]
    # a folder named .app without Info.plist is not a bundle
    (tmp_path / "x.app" / "bin").mkdir(parents=True)
    assert bundle.app_bundle(str(tmp_path / "x.app" / "bin" / "python")) is None


def test_grantee_names_the_app_the_terminal_or_the_interpreter(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    inner = str(app / "Contents" / "MacOS" / "python")
    assert bundle.grantee({}, inner) == f"Owl ({app})"
    assert bundle.grantee({"TERM_PROGRAM": "Apple_Terminal"}, "/usr/bin/python3") == "Terminal"
    assert bundle.grantee({"TERM_PROGRAM": "iTerm.app"}, "/usr/bin/python3") == "iTerm"
    assert (
        bundle.grantee({}, sys.executable)
        == f"the Python that runs Owl ({os.path.realpath(sys.executable)})"
    )


def test_main_executable_runs_modules_and_drops_finders_argument(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    main = bundle.main_executable(app)
    env = bare_env()
    out = subprocess.run(
        [str(main), "-psn_0_12345", "-m", "platform", "--terse"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert out.returncode == 0 and "Linux" in out.stdout, out.stderr
    out = subprocess.run(
        [str(main), "--version"], capture_output=True, text=True, env=env, timeout=30
    )
    assert out.returncode == 0 and out.stdout.startswith("owl "), out.stdout + out.stderr


def test_owl_command_inside_a_bundle_is_the_bundles_executable(tmp_path: Path) -> None:
    app = make_bundle(tmp_path)
    out = subprocess.run(
        [str(app / "Contents" / "MacOS" / "Owl"), "-m", "owl.autostart.command"],
        capture_output=True,
        text=True,
        env=bare_env(),
        timeout=30,
    )
    assert out.stdout.strip() == repr([str(app / "Contents" / "MacOS" / "Owl")]), out.stderr


class BundledOwl(SocketOwl):
    """The real daemon, started by the bundle's own python."""

    def __init__(self, home: Path, app: Path) -> None:
        super().__init__(home, {"interruption": {"grace_window": "10m"}})
        self.env.pop("PYTHONPATH", None)
        self.app = app

    def start(self, wait: bool = True) -> "BundledOwl":
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [str(bundle.main_executable(self.app)), "daemon"],
            env=self.env,
            stdout=logf,
            stderr=logf,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
        logf.close()
        wait_for(
            lambda: self.socket.exists() and self._up() or self._died(),
            timeout=15,
            what="the daemon to answer",
        )
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
            # (the daemon's other children come and go: one may be a zombie)
            out = []
            for p in psutil.Process(d.proc.pid).children():
                try:
                    argv = p.cmdline()
                except psutil.Error:
                    continue
                if "owl.daemon.watchdog" in argv and db in argv and argv[0] == python:
                    out.append(p)
            return out

        wait_for(guards, what="the watchdog, started through the bundle")
        assert len(guards()) == 1, d.log_text()
        cmd = guards()[0].cmdline()
        assert "from owl.cli.bundled import entry" in cmd[2] and cmd[3:5] == [
            "-m",
            "owl.daemon.watchdog",
        ]
        guard = guards()[0]
        job = d.add("sleep=60", project)
        d.machine("idle")
        d.wait_run(job, "running")
        wait_for(d.alive_agent_pids, what="the agent to start")
        d.kill()
        wait_for(lambda: d.alive_agent_pids() == [], timeout=10, what="the watchdog to end the Run")
        wait_for(lambda: not guard.is_running(), what="the watchdog to exit")
        d.proc = None


def test_opened_from_finder_the_bundle_takes_the_login_shells_path(tmp_path: Path) -> None:
    """Finder, the Dock and `open` start Owl.app with launchd's PATH, on which
    the agent is not found; the daemon asks the login shell for the person's
    PATH before anything looks an agent up, and says which PATH it uses."""
    from owl.autostart import launchd
    from owlproc import AGENT
    from test_launchd_session import _stub_shell

    bindir = tmp_path / "brew bin"
    bindir.mkdir()
    agent = bindir / "my-agent"
    agent.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{AGENT}' \"$@\"\n")
    agent.chmod(0o755)
    login_path = f"{bindir}:{launchd.LAUNCHD_PATH}"
    shell = _stub_shell(tmp_path, login_path)
    app = make_bundle(tmp_path)
    d = BundledOwl(tmp_path / "home", app)
    d.write_config(
        {
            "idle": {"after": "1s"},
            "interruption": {"grace_window": "3s"},
            "agents": {"mine": {"command": ["my-agent", "{prompt}"]}},
            "agent": {"default": "mine"},
        }
    )
    d.env.update(PATH=launchd.LAUNCHD_PATH, SHELL=str(shell), OWL_TAKE_LOGIN_PATH="1")
    with d:
        job = d.add("exit=0", make_project(tmp_path / "proj"))
        d.machine("idle")
        done = d.wait_job(job, "review")
        assert done["runs"][-1]["outcome"] == "succeeded"
        said = [ln for ln in d.log_text().splitlines() if " PATH " in ln]
    assert said and said[0].endswith(
        f"PATH {login_path} (from the login shell {shell}; launchd gave {launchd.LAUNCHD_PATH})"
    ), said


def test_mending_path_is_for_launchds_own_path_on_macos_only(tmp_path: Path) -> None:
    from owl.autostart import launchd
    from test_launchd_session import _stub_shell

    shell = str(_stub_shell(tmp_path, "/opt/homebrew/bin:/usr/bin:/bin"))
    env = {"PATH": launchd.LAUNCHD_PATH, "SHELL": shell}
    assert launchd.mend_path(dict(env), "linux") == (launchd.LAUNCHD_PATH, "inherited")
    assert launchd.mend_path(dict(env, OWL_TAKE_LOGIN_PATH="0"), "darwin")[1] == "inherited"
    mended = dict(env)
    assert launchd.mend_path(mended, "darwin")[0] == "/opt/homebrew/bin:/usr/bin:/bin"
    assert mended["PATH"] == "/opt/homebrew/bin:/usr/bin:/bin"
    own = {"PATH": "/Users/me/bin:/usr/bin", "SHELL": shell}  # a terminal's: kept
    assert launchd.mend_path(own, "darwin") == ("/Users/me/bin:/usr/bin", "inherited")
    broken = {"PATH": launchd.LAUNCHD_PATH, "SHELL": str(tmp_path / "no-shell")}
    assert launchd.mend_path(broken, "darwin")[0] == launchd.LAUNCHD_PATH


def test_grantee_under_a_login_item_is_homebrews_python_app(tmp_path: Path) -> None:
    """Homebrew's python3.12 is a symlink into a framework build whose binary
    runs as Python.app: that is what Privacy & Security lists."""
    versions = tmp_path / "Cellar" / "python@3.12" / "Frameworks" / "Python.framework" / "Versions"
    binary = versions / "3.12" / "bin" / "python3.12"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    app = versions / "3.12" / "Resources" / "Python.app"
    (app / "Contents" / "MacOS").mkdir(parents=True)
    link = tmp_path / "bin" / "python3.12"
    link.parent.mkdir()
    link.symlink_to(binary)
    assert bundle.python_app(os.path.realpath(link)) == app
    assert bundle.grantee({}, str(link)) == f"Python ({app}), the Python that runs Owl"
    assert bundle.grantee({"TERM_PROGRAM": "iTerm.app"}, str(link)) == "iTerm"
