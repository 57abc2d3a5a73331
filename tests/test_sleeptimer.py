"""The desktop's own suspend-on-idle timer, where it fires before Owl's idle.after:
read from the real gsettings (a keyfile backend of the test's own), logind's
config files and `pmset -g custom`'s words, and said by `owl status`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import need

from owl.power import sleeptimer
from owlproc import OwlDaemon, wait_for

SCHEMA = "org.gnome.settings-daemon.plugins.power"


def test_the_timer_at_or_before_idle_after_is_the_one_said() -> None:
    gnome = sleeptimer.Timer("GNOME", 900.0, "s", "f")
    logind = sleeptimer.Timer("logind", 600.0, "s", "f")
    assert sleeptimer.first_before([gnome, logind], 600.0) is logind
    assert sleeptimer.first_before([gnome, logind], 599.0) is None
    assert sleeptimer.first_before([gnome, logind], 3600.0) is logind
    words = sleeptimer.words(gnome, 1200.0)
    assert words.startswith("GNOME suspends the machine after 15m without input")
    assert "idle.after (20m)" in words and "power.hold_while_queued = true" in words


def test_systemd_durations_and_the_login_section() -> None:
    assert sleeptimer.systemd_seconds("30min") == 1800
    assert sleeptimer.systemd_seconds("1h 30min") == 5400
    assert sleeptimer.systemd_seconds("90") == 90
    assert sleeptimer.systemd_seconds("soon") is None
    text = "[Login]\n#IdleAction=ignore\nIdleAction=suspend\n[Other]\nIdleActionSec=1s\n"
    assert sleeptimer.parse_logind(text) == {"IdleAction": "suspend"}


def test_logind_files_the_last_one_wins(tmp_path: Path) -> None:
    (tmp_path / "logind.conf").write_text("[Login]\nIdleAction=suspend\nIdleActionSec=20min\n")
    d = tmp_path / "logind.conf.d"
    d.mkdir()
    (d / "10-owl.conf").write_text("[Login]\nIdleActionSec=5min\n")
    patterns = (str(tmp_path / "logind.conf"), str(d / "*.conf"))
    t = sleeptimer.logind_files(patterns)
    assert t is not None and (t.source, t.after_s) == ("logind", 300.0)
    assert "IdleAction=ignore" in t.fix
    (d / "20-off.conf").write_text("[Login]\nIdleAction=ignore\n")
    assert sleeptimer.logind_files(patterns) is None
    assert sleeptimer.logind_files((str(tmp_path / "none.conf"),)) is None  # logind's defaults


def test_logind_read_live_from_its_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    """The running logind's IdleAction and IdleActionUSec, over D-Bus (a stand-in
    logind on a bus of this test's own): what a reload made live, whatever the files say."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from support_logind import StandIn

    need.programs("dbus-daemon")
    with StandIn() as standin:
        monkeypatch.setenv("OWL_LOGIND_BUS", "session")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", standin.address)
        assert sleeptimer.logind_live() == ("ignore", 1800.0)
        assert sleeptimer.logind() is None  # logind's defaults: no action
        standin.set_idle("suspend", 300)
        t = sleeptimer.logind()
        assert t is not None and (t.source, t.after_s) == ("logind", 300.0)
        assert t.setting == "IdleAction=suspend, IdleActionSec=5m"
        standin.set_idle("lock", 60)
        assert sleeptimer.logind() is None  # locking the screen puts nothing to sleep
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/owl-test-bus")
    assert sleeptimer.logind_live() is None  # no logind: its files are read instead


def test_pmset_ac_profile() -> None:
    text = (
        "Battery Power:\n sleep                 1\n displaysleep         2\n"
        "AC Power:\n sleep                 5\n displaysleep         10\n"
    )
    assert sleeptimer.pmset_ac_sleep(text) == 5
    assert sleeptimer.pmset_ac_sleep("AC Power:\n sleep                 0\n") == 0


@pytest.fixture
def gsd_power(tmp_path: Path):
    """GNOME's power daemon, as far as its name goes: what acts on the setting runs."""
    import shutil
    import subprocess

    stand_in = tmp_path / "gsd-power"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", stand_in)
    proc = subprocess.Popen([str(stand_in), "300"])
    yield
    proc.kill()
    proc.wait()


@pytest.fixture
def gsettings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gsd_power) -> dict[str, str]:
    """The real gsettings, on a keyfile of this test's own."""
    need.programs("gsettings")
    env = {"GSETTINGS_BACKEND": "keyfile", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    import subprocess

    probe = subprocess.run(["gsettings", "list-keys", SCHEMA], capture_output=True, text=True)
    if probe.returncode != 0:
        need.missing(f"GNOME's power schema is not installed: {probe.stderr.strip()}")
    return env


def set_gnome(key: str, value: str) -> None:
    import subprocess

    subprocess.run(["gsettings", "set", SCHEMA, key, value], check=True)


def test_gnome_read_with_the_real_gsettings(gsettings: dict[str, str]) -> None:
    set_gnome("sleep-inactive-ac-type", "suspend")
    set_gnome("sleep-inactive-ac-timeout", "300")
    t = sleeptimer.gnome()
    assert t is not None and (t.source, t.after_s) == ("GNOME", 300.0)
    assert t.fix == f"gsettings set {SCHEMA} sleep-inactive-ac-type 'nothing'"
    set_gnome("sleep-inactive-ac-type", "nothing")
    assert sleeptimer.gnome() is None
    set_gnome("sleep-inactive-ac-type", "suspend")
    set_gnome("sleep-inactive-ac-timeout", "0")
    assert sleeptimer.gnome() is None


def test_a_desktop_daemon_is_known_by_its_running_process(tmp_path: Path) -> None:
    """GNOME's setting counts only while its power daemon runs (a schema installed
    without GNOME running puts nothing to sleep): a process of ours, by name."""
    import shutil
    import subprocess

    name = f"owl-gsd-{os.getpid()}"[:15]  # a process's name is 15 characters at most
    assert not sleeptimer.runs_here(name)
    stand_in = tmp_path / name
    shutil.copy(shutil.which("sleep") or "/bin/sleep", stand_in)
    proc = subprocess.Popen([str(stand_in), "60"])
    try:
        wait_for(lambda: sleeptimer.runs_here(name), what="the process seen")
    finally:
        proc.kill()
        proc.wait()
    assert not sleeptimer.runs_here(name)


def test_owl_status_says_the_desktop_suspends_before_idle_after(
    gsettings: dict[str, str], home: Path
) -> None:
    set_gnome("sleep-inactive-ac-type", "suspend")
    set_gnome("sleep-inactive-ac-timeout", "300")  # 5 min, Owl's idle.after 10 min
    with OwlDaemon(home, {"idle": {"after": "10m"}}, env=dict(gsettings)) as d:
        early = wait_for(lambda: d.status()["awake"]["sleeps_first"], what="the suspend timer read")
        assert (early["source"], early["after_s"]) == ("GNOME", 300.0)
        line = next(ln for ln in d.ok("status").splitlines() if ln.startswith("sleep:"))
        assert "GNOME suspends the machine after 5m without input" in line
        assert "sleep-inactive-ac-type 'nothing'" in line
    # idle.after below the timer: nothing to say
    with OwlDaemon(home, {"idle": {"after": "4m"}}, env=dict(gsettings)) as d:
        d.ok("status")
        assert d.status()["awake"]["sleeps_first"] is None
        assert os.environ["GSETTINGS_BACKEND"] == "keyfile"
