"""Owl on a person's desktop machine, as its user: Debian 13 with systemd, logind,
a delegated user manager (cgroup v2), swap and the stub resolver (see conftest).
Every test runs the real Owl, set up from this checkout by the README's command,
as the ordinary user `dev`, through ssh into dev's own login session."""

from __future__ import annotations

import base64
import json
import shlex
from pathlib import Path

from system.conftest import OWL, Desktop


def config(home: str, body: str) -> str:
    """A shell line writing the home's config.toml (`body`, as it is)."""
    data = base64.b64encode(body.encode()).decode()
    return f"mkdir -p {home} && echo {data} | base64 -d > {home}/config.toml"


def service_on(desktop: Desktop, home: str) -> str:
    """`owl autostart on --service`, then until its daemon listens (a Python
    daemon starts slowly under TCG); what the command said."""
    out = desktop.sh(f"export OWL_HOME={home}; {OWL} autostart on --service")
    logged(desktop, home, r" owl daemon \S+ started \(pid ", "the unit's daemon", 600)
    return out


# The daemon's own log lines, as it writes them (owl.engine)
RUN_STARTED = r" run [0-9]+ of job [0-9]+ started \(pid "
RUN_ENDED = r" run [0-9]+ (succeeded|failed|interrupted) \("


def logged(desktop: Desktop, home: str, pattern: str, what: str, timeout: float = 300) -> str:
    """Until the daemon's log has a line matching `pattern` (grep -E); those
    lines. Waits read the log, a cheap look, where each `owl` command costs
    the emulated CPU seconds that the daemon under test needs too; what is
    judged is then read once through `owl` itself."""
    return desktop.wait(f"grep -E {shlex.quote(pattern)} {home}/logs/owl.log", what, timeout)


def sleeper_config(extra: str = "") -> str:
    return (
        '[agents.sleeper]\ncommand = ["sh", "-c", "echo started; sleep 300"]\n'
        '[agent]\ndefault = "sleeper"\n' + extra
    )


def test_the_machine_is_a_desktop_and_owl_was_set_up_by_its_user(desktop: Desktop) -> None:
    out = desktop.sh(
        "cat /proc/1/comm; systemctl --user is-system-running; echo $XDG_RUNTIME_DIR; "
        "cat /sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/cgroup.controllers; "
        "/sbin/swapon --noheadings --show=NAME; grep ^nameserver /etc/resolv.conf; "
        f"{OWL} --version"
    )
    lines = out.split("\n")
    assert lines[0] == "systemd" and lines[1] in ("running", "degraded"), out
    assert lines[2] == "/run/user/1000" and lines[-2] == "owl 0.1.0" and lines[-1] == ""
    assert {"cpu", "memory", "pids"} <= set(lines[3].split()), out
    assert "/swapfile" in out and "nameserver 127.0.0.53" in out


FIVE_SESSIONS = Path(__file__).parents[1] / "agents" / "five_sessions.py"
PRIORITY = f"cd ~/owl && .venv/bin/python - --report <<'PY'\n{FIVE_SESSIONS.read_text()}PY\n"


def test_every_session_of_a_run_is_lowered_as_dev(desktop: Desktop) -> None:
    """The kernel lets dev write one session's weight per 100 ms: all five are
    written, off the sweeping thread."""
    assert desktop.sh(PRIORITY).split() == ["11"] * 5


def test_the_daemon_runs_as_the_user_unit_and_a_runs_cgroup_freezes_and_is_killed(
    desktop: Desktop, owl_home: str
) -> None:
    h = owl_home
    desktop.sh(config(h, sleeper_config('[sandbox]\nmode = "off"\n')))
    out = service_on(desktop, h)
    assert "owl.service" in out
    props = desktop.sh(
        "systemctl --user show owl.service -p Delegate -p OOMPolicy -p Restart "
        "-p TimeoutStopUSec -p ActiveState"
    )
    assert "Delegate=yes" in props and "OOMPolicy=continue" in props
    assert "Restart=on-failure" in props and "ActiveState=active" in props
    job = desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- work").strip()
    desktop.sh(f"export OWL_HOME={h}; {OWL} start")
    started = logged(desktop, h, RUN_STARTED, "the Run to work")
    run = started.split(" run ", 1)[1].split()[0]
    base = (
        "/sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/app.slice/owl.service"
    )
    group = desktop.wait(f"ls -d {base}/owl-*/run-{run}", "the Run's cgroup").strip()
    assert desktop.sh(f"cat {group}/cgroup.procs").split(), "the Run's processes are in it"
    # the cgroup's freeze brackets the signals (nothing forks while they go), then
    # every process of it is left stopped: what a person's `ps` shows
    states = f"for p in $(cat {group}/cgroup.procs); do cut -d' ' -f3 /proc/$p/stat; done"
    desktop.sh(f"export OWL_HOME={h}; {OWL} pause")
    desktop.wait(f'[ -z "$({states} | grep -v T)" ]', "every process of the cgroup stopped")
    assert desktop.sh(f"grep frozen {group}/cgroup.events").split() == ["frozen", "0"]
    desktop.sh(f"export OWL_HOME={h}; {OWL} resume")
    desktop.wait(f"! {states} | grep -q T", "the cgroup's processes running again")
    desktop.sh(f"export OWL_HOME={h}; {OWL} stop")
    desktop.wait(f"! test -d {group}", "the Run's cgroup gone")
    shown = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} jobs show {job} --json"))
    assert shown["runs"][0]["outcome"] == "interrupted", shown


def test_owl_add_after_a_stop_reaches_the_unit_again(desktop: Desktop, owl_home: str) -> None:
    h = owl_home
    desktop.sh(config(h, sleeper_config()))
    service_on(desktop, h)
    desktop.sh(f"export OWL_HOME={h}; {OWL} daemon stop")
    desktop.wait("! systemctl --user is-active -q owl.service", "the unit stopped")
    p = desktop.run_sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- again")
    assert p.returncode == 0, p.stderr
    assert "as the user unit owl.service" in p.stderr, p.stderr
    pid = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} daemon status --json"))["pid"]
    assert desktop.sh(f"cat /proc/{pid}/cgroup").strip().endswith("/owl.service")


def test_the_agent_is_found_on_the_login_path(desktop: Desktop, owl_home: str) -> None:
    """Claude Code's installer puts `claude` in ~/.local/bin, which dev's ~/.profile
    puts on the login PATH and the user manager's PATH lacks."""
    h = owl_home
    desktop.sh(
        "mkdir -p ~/.local/bin && printf '#!/bin/sh\\necho hi\\n' > ~/.local/bin/owl-test-agent "
        "&& chmod +x ~/.local/bin/owl-test-agent"
    )
    assert ".local/bin" not in desktop.sh("systemctl --user show-environment | grep ^PATH=")
    desktop.sh(
        config(
            h,
            '[agents.mine]\ncommand = ["owl-test-agent", "{prompt}"]\n[agent]\ndefault = "mine"\n',
        )
    )
    service_on(desktop, h)
    p = desktop.run_sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- hello")
    assert p.returncode == 0, p.stderr
    desktop.sh("rm ~/.local/bin/owl-test-agent")


def test_an_oom_kill_inside_a_run_does_not_stop_owl(desktop: Desktop, owl_home: str) -> None:
    h = owl_home
    hog = (
        '[agents.hog]\ncommand = ["python3", "-c", '
        '"b = []\\nwhile True: b.append(bytearray(50 << 20))"]\n'
        '[agent]\ndefault = "hog"\n[sandbox]\nmode = "off"\n[jobs]\nattempts = 1\n'
    )
    desktop.sh(config(h, hog))
    service_on(desktop, h)
    desktop.sh("systemctl --user set-property --runtime owl.service MemoryMax=300M MemorySwapMax=0")
    before = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} daemon status --json"))["pid"]
    job = desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- eat").strip()
    desktop.sh(f"export OWL_HOME={h}; {OWL} start")
    logged(desktop, h, RUN_ENDED, "the Run to end")
    shown = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} jobs show {job} --json"))
    # the unit's limit, not the Run's cap (runs.memory, half the machine), killed it
    assert shown["runs"][0]["outcome"] == "failed", shown["runs"]
    assert desktop.sh("systemctl --user is-active owl.service").strip() == "active"
    after = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} daemon status --json"))["pid"]
    assert after == before
    assert "oom" in desktop.sh(
        "systemctl --user show owl.service -p NRestarts -p Result; "
        "grep oom_kill /sys/fs/cgroup/user.slice/user-$(id -u).slice/"
        "user@$(id -u).service/app.slice/owl.service/memory.events"
    )


def test_keep_awake_through_the_real_logind(desktop: Desktop, owl_home: str) -> None:
    h = owl_home
    desktop.sh(config(h, sleeper_config('[sandbox]\nmode = "off"\n')))
    service_on(desktop, h)
    desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- work; {OWL} start")
    desktop.wait("systemd-inhibit --list --no-legend | grep -q Owl", "Owl's inhibitor")
    desktop.sh(f"export OWL_HOME={h}; {OWL} stop")
    desktop.wait("! systemd-inhibit --list --no-legend | grep -q Owl", "the inhibitor let go")


def test_a_contained_run_has_network_and_dns(desktop: Desktop, owl_home: str) -> None:
    """Debian 13's pasta and systemd-resolved's stub resolver: a Run inside
    bubblewrap resolves a name and reaches it."""
    h = owl_home
    net = (
        '[agents.net]\ncommand = ["sh", "-c", '
        '"getent hosts deb.debian.org && python3 -c \\"import urllib.request as u; '
        "print(u.urlopen('http://deb.debian.org/debian/', timeout=30).status)"
        '\\""]\n[agent]\ndefault = "net"\n[sandbox]\nmode = "required"\n[jobs]\nattempts = 1\n'
    )
    desktop.sh(config(h, net))
    service_on(desktop, h)
    job = desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- reach").strip()
    desktop.sh(f"export OWL_HOME={h}; {OWL} start")
    logged(desktop, h, RUN_ENDED, "the Run to end")
    log = desktop.sh(f"export OWL_HOME={h}; {OWL} logs {job} --raw", check=False)
    assert "200" in log.split(), log
