"""The daemon started when a verb needs one (as tmux starts its server), and
start-at-login, including the systemd user unit for machines without a desktop."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from owl.autostart import systemd
from owl.daemon.main import STOP_WAIT
from owlproc import AGENT, OWL, make_project, wait_for


@pytest.fixture
def home(tmp_path: Path):
    """An OWL_HOME with a command agent, and the daemons started there stopped at the end."""
    h = tmp_path / "home"
    h.mkdir()
    (h / "config.toml").write_text(
        '[agents.script]\ncommand = ["%s", "%s", "{prompt}"]\n[agent]\ndefault = "script"\n'
        '[idle]\nafter = "1s"\n' % (sys.executable, AGENT)
    )
    yield h
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if (p.info["environ"] or {}).get("OWL_HOME") == str(h) and p.info["cmdline"][-1:] == [
                "daemon"
            ]:
                p.send_signal(signal.SIGTERM)
                p.wait(15)
        except (psutil.Error, TypeError):
            pass


def owl(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual")
    e.pop("OWL_NO_AUTOSTART", None)
    e.update(env)
    return subprocess.run([*OWL, *args], env=e, capture_output=True, text=True, timeout=60)


def daemons(home: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if (
                (p.info["environ"] or {}).get("OWL_HOME") == str(home)
                and p.info["cmdline"][-2:] == ["owl", "daemon"]
                and p.status() != "zombie"
            ):
                out.append(p)
        except (psutil.Error, TypeError):
            pass
    return out


def test_add_starts_the_daemon_in_the_background_once_even_when_two_race(home, tmp_path):
    project = make_project(tmp_path / "proj")
    results: list[subprocess.CompletedProcess] = []

    def add(n: int) -> None:
        results.append(owl(home, "add", "--project", str(project), f"sleep=0.1 exit=0 #{n}"))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    ids = sorted(int(r.stdout) for r in results)
    assert ids == [1, 2, 3]  # stdout stays the Job's id
    said = [r.stderr for r in results if "started the daemon" in r.stderr]
    assert len(said) == 1, [r.stderr for r in results]  # one daemon started, one said so
    assert f"log {home / 'logs' / 'owl.log'}" in said[0]
    [d] = daemons(home)
    assert d.ppid() != os.getpid() and os.getsid(d.pid) == d.pid  # a session of its own
    assert json.loads(owl(home, "status", "--json").stdout)["queue_length"] == 3
    again = owl(home, "daemon", "--detach")
    assert again.returncode == 0 and f"already running (pid {d.pid}, socket " in again.stdout


def test_no_start_and_the_environment_opt_out(home, tmp_path):
    project = make_project(tmp_path / "proj")
    p = owl(home, "add", "--no-start", "--project", str(project), "x")  # queued, not started
    assert p.returncode == 0 and "queued for the next one" in p.stderr, p.stderr
    p = owl(home, "shift", "start", "--for", "5m", OWL_NO_AUTOSTART="1")
    assert p.returncode == 3
    p = owl(home, "start", "--no-start")
    assert p.returncode == 3
    for verb in ("pause", "resume", "stop"):  # live work: never started for
        p = owl(home, verb)
        assert p.returncode == 3, (verb, p.stderr)
    assert daemons(home) == []


def test_shift_start_and_start_start_one_too(home, tmp_path):
    p = owl(home, "shift", "start", "--for", "10m")
    assert p.returncode == 0 and "Shift started" in p.stdout and "10m" in p.stdout, p
    assert "started the daemon" in p.stderr
    p = owl(home, "shift", "start", "--for", "5m")
    assert p.returncode == 0 and "for the next 10m" in p.stdout, p.stdout  # not 9m 59s
    owl(home, "shift", "stop")
    os.kill(daemons(home)[0].pid, signal.SIGTERM)
    wait_for(lambda: not daemons(home), timeout=15, what="the daemon to stop")
    p = owl(home, "start")
    assert p.returncode == 1 and "no Job is waiting" in p.stderr  # started, then refused
    assert len(daemons(home)) == 1


def test_detach_says_where_the_log_is_and_a_broken_config_is_one_line(home):
    (home / "config.toml").write_text("[idle]\nafter = 'soon'\n")
    p = owl(home, "daemon", "--detach")
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "the daemon did not start" in p.stderr and "idle.after" in p.stderr
    assert str(home / "logs" / "owl.log") in p.stderr


def test_autostart_off_twice_and_status(tmp_path):
    cfg = tmp_path / "cfg"
    env = {"XDG_CONFIG_HOME": str(cfg)}
    home = tmp_path / "home"
    p = owl(home, "autostart", "off", **env)
    assert p.returncode == 0 and p.stdout.startswith("already off (no ")
    assert owl(home, "autostart", "on", DISPLAY=":99", **env).returncode == 0
    p = owl(home, "autostart", "on", DISPLAY=":99", **env)
    assert p.returncode == 0 and "already starts at login" in p.stdout
    p = owl(home, "autostart", "off", **env)
    assert p.returncode == 0 and "removed" in p.stdout and "owl.desktop" in p.stdout
    assert json.loads(owl(home, "autostart", "status", "--json", **env).stdout)["on"] is False


def test_autostart_without_a_desktop_says_it_will_not_start_owl(tmp_path):
    """No DISPLAY, no WAYLAND_DISPLAY: nothing here reads an XDG autostart entry, and
    this container has no user manager either: said, with what does start Owl."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    p = owl(tmp_path / "home", "autostart", "on", **env)
    assert p.returncode == 0 and "will start" not in p.stdout, p.stdout
    assert "it will not start Owl here" in p.stdout and p.stdout.count("\n") == 1
    if systemd.problem() is not None:
        assert "owl daemon --detach" in p.stdout
    doc = json.loads(owl(tmp_path / "home", "autostart", "on", "--json", **env).stdout)
    assert doc["starts"] is False and doc["why"] == "no desktop session"


def test_the_systemd_unit_runs_this_owls_daemon_with_its_home():
    text = systemd.render(["/opt/owl venv/bin/owl"], {"OWL_HOME": "/home/a/owl home"})
    assert "ExecStart='/opt/owl venv/bin/owl' daemon" in text
    assert "Environment='OWL_HOME=/home/a/owl home'" in text
    assert "KillMode=mixed" in text and "WantedBy=default.target" in text
    assert "Environment=OWL_NO_AUTOSTART=1" in text
    # its Runs' cgroups are the daemon's to make; a Run's OOM kill does not stop
    # Owl; a crash starts it again; a stop outlasts the Runs' 5 s kill
    lines = text.splitlines()
    assert {"Delegate=yes", "OOMPolicy=continue", "Restart=on-failure"} <= set(lines)
    # and the daemon's own wait for its Runs' end, with a margin for its last words
    assert int(next(x for x in lines if x.startswith("TimeoutStopSec="))[15:]) >= STOP_WAIT + 5
    assert systemd.unit_home(text) == "/home/a/owl home"
    assert systemd.unit_home(systemd.render(["/usr/bin/owl"], {})) is None


def test_service_without_a_systemd_user_manager_is_refused_in_one_line(tmp_path):
    """This machine runs no systemd user manager (a container): say so, write nothing."""
    cfg = tmp_path / "cfg"
    if systemd.problem() is None:
        pytest.skip("this session has a systemd user manager")
    p = owl(tmp_path / "home", "autostart", "on", "--service", XDG_CONFIG_HOME=str(cfg))
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "cannot install a systemd user unit" in p.stderr and "owl daemon --detach" in p.stderr
    assert not (cfg / "systemd").exists()


def test_service_with_systemctl_enables_the_unit(tmp_path):
    """systemctl stands in for a user manager this container cannot run: it records
    what Owl asks of it, and the unit file is checked by systemd-analyze where it exists."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    calls = tmp_path / "calls"
    fake = bin_ / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 0\n')
    fake.chmod(0o755)
    cfg = tmp_path / "cfg"
    env = {"XDG_CONFIG_HOME": str(cfg), "PATH": f"{bin_}:{os.environ['PATH']}"}
    home = tmp_path / "home"
    p = owl(home, "autostart", "on", "--service", **env)
    assert p.returncode == 0, p.stderr
    unit = cfg / "systemd" / "user" / "owl.service"
    assert str(unit) in p.stdout and "enable-linger" in p.stdout
    assert f"OWL_HOME={home}" in unit.read_text()
    assert calls.read_text().splitlines() == [
        "--user show-environment",
        "--user daemon-reload",
        "--user enable owl.service",
        "--user restart owl.service",  # a daemon running from the unit before starts anew
    ]
    st = json.loads(owl(home, "autostart", "status", "--json", **env).stdout)
    assert st["service"] is True and st["unit"] == str(unit)
    p = owl(home, "autostart", "off", **env)
    assert p.returncode == 0 and str(unit) in p.stdout and not unit.exists()
    assert "--user disable --now owl.service" in calls.read_text()


def test_add_while_another_daemon_is_starting_uses_that_one(home, tmp_path):
    """The tray (or `owl daemon`) starting at the same moment: one daemon, and the add lands."""
    project = make_project(tmp_path / "proj")
    env = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual")
    with open(tmp_path / "first.log", "wb") as out:
        first = subprocess.Popen([*OWL, "daemon"], env=env, stdout=out, stderr=out)
    try:
        p = owl(home, "add", "--project", str(project), "sleep=0.1")
        assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
        # whichever of the two took the lock serves; the other leaves by itself
        [left] = wait_for(
            lambda: len(d := daemons(home)) == 1 and d, timeout=20, what="one daemon to be left"
        )
        if left.pid != first.pid:
            assert first.wait(10) == 1 and "already running" in (tmp_path / "first.log").read_text()
        assert json.loads(owl(home, "status", "--json").stdout)["queue_length"] == 1
    finally:
        first.terminate()
        first.wait(15)


MANAGER = """#!/bin/sh
# systemctl --user, standing in for a user manager this container cannot run:
# `start owl.service` runs the unit's ExecStart in the background, as the manager would
echo "$@" >> {calls}
case "$*" in
  "--user start owl.service")
    cmd=$(sed -n 's/^ExecStart=//p' {unit})
    OWL_NO_AUTOSTART=1 setsid sh -c "exec $cmd" >> {log} 2>&1 < /dev/null &
    ;;
  "--user show owl.service"*) echo ActiveState=activating; echo Result=success ;;
esac
exit 0
"""


def test_add_reaches_the_user_unit_through_the_manager_never_a_daemon_of_its_own(home, tmp_path):
    """With this home's daemon installed as a user unit, `owl add` with no daemon
    running starts the unit (`systemctl --user start owl.service`) and waits for
    that daemon; a unit for another home is not this one's."""
    bin_, cfg = tmp_path / "bin", tmp_path / "cfg"
    bin_.mkdir()
    calls, unit = tmp_path / "calls", cfg / "systemd" / "user" / "owl.service"
    (bin_ / "systemctl").write_text(
        MANAGER.format(calls=calls, unit=unit, log=tmp_path / "manager.log")
    )
    (bin_ / "systemctl").chmod(0o755)
    env = {"XDG_CONFIG_HOME": str(cfg), "PATH": f"{bin_}:{os.environ['PATH']}"}
    project = make_project(tmp_path / "proj")
    try:
        assert owl(home, "autostart", "on", DISPLAY=":99", **env).returncode == 0
        assert unit.exists() and "--user enable" not in calls.read_text()  # the tray starts it
        p = owl(home, "add", "--project", str(project), "sleep=0.1", **env)
        assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
        assert "--user start owl.service" in calls.read_text().splitlines()
        [d] = [
            psutil.Process(int(json.loads(owl(home, "daemon", "status", "--json").stdout)["pid"]))
        ]
        exec_start = next(ln for ln in unit.read_text().splitlines() if ln.startswith("ExecStart="))
        assert d.cmdline()[-2:] == shlex.split(exec_start[len("ExecStart=") :])[-2:]
        assert d.environ().get("OWL_NO_AUTOSTART") == "1"  # the unit's, not the terminal's
        assert f"started the daemon in the background (pid {d.pid}" in p.stderr  # no cgroup here
        # another home: its daemon is not the unit's
        other = tmp_path / "other"
        other.mkdir()
        (other / "config.toml").write_text((home / "config.toml").read_text())
        p = owl(other, "add", "--project", str(project), "sleep=0.1", **env)
        assert p.returncode == 0, p.stderr
        assert calls.read_text().count("--user start owl.service") == 1
    finally:
        for h in (home, tmp_path / "other"):
            for d in daemons(h):
                d.terminate()
