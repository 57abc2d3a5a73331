"""`owl autostart on` on a person's desktop machine (see conftest) says truthfully
when it cannot start Owl: dev's ssh session has no graphical session, so nothing
will read the login item; and with dev's user manager stopped (as before a first
login where lingering is off), no user unit can start the daemon either."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

from system.conftest import OWL, Desktop

MANAGER = "user@$(id -u).service"


@contextmanager
def no_user_manager(desktop: Desktop) -> Iterator[None]:
    """dev's user manager stopped (dev's ssh session lives on, in its own scope);
    started again after, and waited for."""
    desktop.sh(f"sudo systemctl stop {MANAGER}")
    try:
        yield
    finally:
        desktop.sh(f"sudo systemctl start {MANAGER}")
        desktop.wait(
            "systemctl --user is-system-running | grep -qxE 'running|degraded'",
            "dev's user manager",
        )


def test_autostart_says_when_it_cannot_start_owl(desktop: Desktop, owl_home: str) -> None:
    h = owl_home
    assert desktop.sh("echo ${DISPLAY:-none} ${WAYLAND_DISPLAY:-none}").split() == ["none"] * 2
    p = desktop.run_sh(f"export OWL_HOME={h}; {OWL} autostart on")
    assert p.returncode == 0, p.stderr
    said = p.stdout.strip()
    assert said.startswith("wrote /home/dev/.config/autostart/owl.desktop, but it will not start")
    assert "this session has none (no DISPLAY or WAYLAND_DISPLAY)" in said, said
    # the user manager answers here: the way that does start Owl
    assert "`owl autostart on --service` runs the daemon as a systemd user unit" in said, said
    doc = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} autostart on --json"))
    assert (doc["starts"], doc["why"]) == (False, "no desktop session"), doc
    assert desktop.sh("systemctl --user is-active owl.service", check=False).strip() != "active"
    with no_user_manager(desktop):
        without_a_user_manager(desktop, h)


def without_a_user_manager(desktop: Desktop, h: str) -> None:
    p = desktop.run_sh(f"export OWL_HOME={h}; {OWL} autostart on")
    assert p.returncode == 0, p.stderr
    said = p.stdout.strip()
    assert "it will not start Owl here" in said, said
    assert "this session has no systemd user manager" in said, said
    assert "`owl daemon --detach` starts the daemon now" in said, said
    p = desktop.run_sh(f"export OWL_HOME={h}; {OWL} autostart on --service")
    assert p.returncode == 1 and p.stdout == "", p
    line = p.stderr.strip()
    assert "\n" not in line, line
    assert line.startswith(
        "owl: cannot install a systemd user unit: this session has no systemd user manager"
    ), line
    assert "`owl daemon --detach` runs the daemon in the background instead" in line, line
