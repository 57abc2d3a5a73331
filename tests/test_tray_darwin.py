"""The macOS tray's way out, on Linux over stand-in PyObjC.

The real daemon and tray run in one process (tests/support/darwin_tray.py)
with pystray's darwin backend over tests/support/fake_pyobjc, whose AppKit
works a main-thread queue as its run loop, asks the application delegate
before terminating, and ends the process with os._exit as AppKit's exit()
does (no Python `finally` runs). SIGUSR1 stands for Cmd-Q or logout.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owlproc import SocketOwl, make_project, wait_for

HARNESS = Path(__file__).resolve().parent / "support" / "darwin_tray.py"


class DarwinTray(SocketOwl):
    def __init__(self, home: Path) -> None:
        super().__init__(home, {"interruption": {"grace_window": "10m"}})
        self.calls = home / "pyobjc.log"
        self.env["FAKE_PYOBJC_LOG"] = str(self.calls)

    def start(self, wait: bool = True) -> "DarwinTray":
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(HARNESS)],
            env=self.env,
            stdout=logf,
            stderr=logf,
            stdin=subprocess.DEVNULL,
        )
        logf.close()
        wait_for(lambda: "run" in self.said() or self._died(), timeout=15, what="the run loop")
        assert not self._died(), self.log_text()
        wait_for(self._up, timeout=15, what="the daemon to answer")
        return self

    def _up(self) -> bool:
        try:
            self.ask("ping")
            return True
        except Exception:
            return False

    def said(self) -> list[str]:
        try:
            return self.calls.read_text().splitlines()
        except FileNotFoundError:
            return []

    def runs(self) -> list[tuple]:
        with sqlite3.connect(f"file:{self.home / 'owl.db'}?mode=ro", uri=True) as db:
            return db.execute("SELECT outcome, ended_by FROM runs").fetchall()

    def one_live_run(self, prompt: str, project: Path) -> list[int]:
        job = self.add(prompt, project)
        self.machine("idle")
        self.wait_run(job, "running")
        return wait_for(self.alive_agent_pids, what="the agent to start")


@pytest.fixture
def tray(tmp_path: Path):
    t = DarwinTray(tmp_path / "home")
    t.start()
    yield t
    if t.proc is not None and t.proc.poll() is None:
        t.kill()
    t.kill_leftovers()


def test_signals_go_through_the_run_loop_and_the_delegate_is_owls(tray: DarwinTray) -> None:
    said = tray.said()
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        assert f"MachSignals.signal {name}" in said, said
    assert "setDelegate_ OwlApplicationDelegate" in said


def test_sigterm_asks_the_runs_to_stop_and_kills_them_5s_later(
    tray: DarwinTray, tmp_path: Path
) -> None:
    pids = tray.one_live_run("trap-term sleep=60", make_project(tmp_path / "proj"))
    t0 = time.monotonic()
    tray.proc.send_signal(signal.SIGTERM)
    assert tray.proc.wait(20) == 0
    took = time.monotonic() - t0
    assert 4.5 <= took < 12, took  # TERM ignored, KILL 5 s later
    assert tray.alive_agent_pids() == [] and all(p not in tray.alive_agent_pids() for p in pids)
    assert tray.runs() == [("interrupted", "sigkill")]
    said = tray.said()
    assert said.index("terminate_ later") < said.index("replyToApplicationShouldTerminate_ True")
    assert said[-1] == "exit"
    assert "the daemon died" not in tray.log_text(), "the watchdog was released cleanly"
    # App Nap was held off from the start until Owl had stopped
    (nap,) = [ln for ln in said if ln.startswith("beginActivityWithOptions_reason_")]
    assert said.index(nap) < said.index("run")
    assert said.index("endActivity_") < said.index("replyToApplicationShouldTerminate_ True")


def test_cmd_q_or_logout_stops_a_well_behaved_run_with_sigterm(
    tray: DarwinTray, tmp_path: Path
) -> None:
    tray.one_live_run("sleep=60", make_project(tmp_path / "proj"))
    t0 = time.monotonic()
    tray.proc.send_signal(signal.SIGUSR1)  # the stand-in's Cmd-Q
    assert tray.proc.wait(20) == 0
    assert time.monotonic() - t0 < 4.5
    assert tray.alive_agent_pids() == []
    assert tray.runs() == [("interrupted", "sigterm")]
    assert "terminate_ later" in tray.said()


def test_sigint_through_pystrays_handler_takes_the_same_path(tray: DarwinTray) -> None:
    tray.proc.send_signal(signal.SIGINT)
    assert tray.proc.wait(20) == 0
    said = tray.said()
    assert said.count("terminate_ later") == 1  # pystray's and Owl's handlers: one stop
    assert said[-1] == "exit"


def test_the_status_item_is_changed_only_on_the_main_thread(
    tray: DarwinTray, tmp_path: Path
) -> None:
    """AppKit crashes (recent macOS) or complains when a status item, its button or
    its menu is touched off the main thread; the stand-ins raise there. The icon
    is shown, redrawn, retitled and given new menus as a Run starts: all of it
    through the run loop."""

    def off_main() -> list[str]:
        return [ln for ln in tray.said() if ln.startswith("OFF MAIN THREAD")]

    def shown() -> bool:
        return any(ln.startswith("setHidden_ False") for ln in tray.said())

    wait_for(lambda: shown() or off_main(), what="the icon shown")
    assert not off_main(), tray.said()
    tray.one_live_run("sleep=60", make_project(tmp_path / "proj"))
    wait_for(
        lambda: (
            [ln for ln in tray.said() if ln.startswith("setToolTip_ ") and "job 1" in ln]
            or off_main()
        ),
        what="the icon to say the Run works",
    )
    said = tray.said()
    assert not [ln for ln in said if ln.startswith("OFF MAIN THREAD")], said
    for setter in ("setHidden_ False", "setImage_", "setToolTip_", "setMenu_"):
        assert any(ln.startswith(setter) for ln in said), (setter, "\n".join(said))


def test_outside_a_bundle_the_tray_is_a_menu_bar_accessory(tray: DarwinTray) -> None:
    said = tray.said()
    assert "setActivationPolicy_ accessory" in said, said  # no Dock icon, no "Quit Python"
    assert said.index("setActivationPolicy_ accessory") < said.index("run")


def test_inside_owl_app_the_bundle_says_it_itself(tmp_path: Path) -> None:
    """LSUIElement in Owl.app's Info.plist does it before any code runs."""
    from test_bundle import make_bundle

    from owl.tray.darwin import be_accessory

    asked: list[int] = []
    nsapp = type("App", (), {"setActivationPolicy_": lambda self, p: asked.append(p)})()
    appkit = type(
        "AppKit",
        (),
        {
            "NSApplication": type("A", (), {"sharedApplication": staticmethod(lambda: nsapp)}),
            "NSApplicationActivationPolicyAccessory": 1,
        },
    )
    app = make_bundle(tmp_path)
    assert not be_accessory(appkit, str(app / "Contents" / "MacOS" / "python")) and asked == []
    assert be_accessory(appkit, "/opt/homebrew/bin/python3.12") and asked == [1]
