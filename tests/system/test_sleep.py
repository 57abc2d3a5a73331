"""The machine sleeping first: logind's own suspend-on-idle timer set below Owl's
`idle.after`, as a desktop's administrator sets it (a drop-in under
/etc/systemd/logind.conf.d, logind reloaded). `owl status` says so and what to
change, and `power.hold_while_queued` holds logind's idle inhibitor while a Job
waits, so the machine lives to reach Owl's idle time (see conftest)."""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from system.conftest import OWL, Desktop
from system.test_desktop import config, service_on, sleeper_config

DROP_IN = "/etc/systemd/logind.conf.d/90-owl-test.conf"
IDLE_ACTION = (
    "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 "
    "org.freedesktop.login1.Manager IdleAction"
)


@pytest.fixture
def logind_suspends_after_an_hour(desktop: Desktop) -> Iterator[None]:
    """logind's IdleAction=suspend after 1 h, live; undone after. The machine never
    reaches it while the test runs: dev's ssh session is never idle to logind."""
    desktop.sh(
        f"sudo mkdir -p {DROP_IN.rsplit('/', 1)[0]} && "
        f"printf '[Login]\\nIdleAction=suspend\\nIdleActionSec=1h\\n' | sudo tee {DROP_IN} "
        "> /dev/null && sudo systemctl reload systemd-logind"
    )
    desktop.wait(f"{IDLE_ACTION} | grep -qx 's \"suspend\"'", "logind's IdleAction reloaded")
    yield
    desktop.sh(f"sudo rm -f {DROP_IN} && sudo systemctl reload systemd-logind")
    desktop.wait(f"{IDLE_ACTION} | grep -qx 's \"ignore\"'", "logind's IdleAction undone")


def test_logind_suspending_first_is_said_and_a_waiting_job_holds_the_machine(
    desktop: Desktop, owl_home: str, logind_suspends_after_an_hour: None
) -> None:
    h = owl_home
    extra = '[sandbox]\nmode = "off"\n[idle]\nafter = "2h"\n[power]\nhold_while_queued = true\n'
    desktop.sh(config(h, sleeper_config(extra)))
    service_on(desktop, h)
    # the person is here (idle.after 2 h): the Job waits, and its wait holds the machine
    job = desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- later").strip()
    held = desktop.wait(
        "systemd-inhibit --list --no-legend | grep Owl", "Owl's inhibitor while the Job waits"
    )
    assert "idle" in held.split() and "block" in held.split(), held
    st = json.loads(desktop.sh(f"export OWL_HOME={h}; {OWL} status --json"))
    awake = st["awake"]
    assert awake["held"] and awake["runs"] == [], awake
    assert awake["why"] == "Jobs wait, on AC (power.hold_while_queued)", awake
    early = awake["sleeps_first"]
    assert early is not None, awake
    assert (early["source"], early["after_s"]) == ("logind", 3600.0), early
    assert "IdleAction=suspend" in early["setting"], early
    assert "IdleAction=ignore" in early["fix"], early
    line = next(
        ln
        for ln in desktop.sh(f"export OWL_HOME={h}; {OWL} status").splitlines()
        if ln.startswith("sleep:")
    )
    assert "logind suspends the machine after 1h without input" in line, line
    assert "idle.after (2h)" in line and "power.hold_while_queued" in line, line
    # the queue emptied, the hold is let go
    desktop.sh(f"export OWL_HOME={h}; {OWL} jobs drop {job}")
    desktop.wait("! systemd-inhibit --list --no-legend | grep -q Owl", "the inhibitor let go")
