"""A missing Input Monitoring grant is said where the person looks: first in
`owl status`, in the detectors line, in the tray's heading, and in one
notification.

macOS is stood in for by support/fake_quartz (its tap hears the pointer only
until the grant, as Apple documents for a listen-only tap made without Input
Monitoring, and preflight says what TCC says); the machine, the status
document, the status text, the menu and the notices are Owl's own."""

from __future__ import annotations

import types

import pytest
from owl.cli.status import _status_text
from owl.idle import Plan
from owl.idle.machine import RealMachine
from owl.idle.quartz import SETTINGS_PATH, QuartzHooks, QuartzReader
from owl.tray.menu import build_menu
from owl.tray.wording import status_line
from owl.tray.notices import Notices
from owl.verbs import statusdoc
from owlproc import wait_for
from support.fake_quartz import FakeQuartz

APP = "Owl (/Applications/Owl.app)"


@pytest.fixture
def machine():
    q = FakeQuartz(granted=False)
    m = RealMachine(plan=lambda: Plan(QuartzHooks(q, app=APP, grant_poll=0.02), [QuartzReader(q)]))
    m.start(lambda: None)
    yield q, m
    m.stop()


def status_of(reading) -> dict:
    """The status document's machine part and its lead, as the daemon makes them."""
    e = types.SimpleNamespace(
        reading=reading,
        cfg=types.SimpleNamespace(idle_after=300.0, require_ac_power=False),
        core=types.SimpleNamespace(in_use=True, on_battery=False),
    )
    return {
        "machine": statusdoc.machine(e),
        "attention": statusdoc.attention(reading, [], [], []),
        "paused": False,
        "shift": None,
        "runs": [],
        "queue": [],
    }


def test_without_the_grant_status_leads_with_it_and_the_detectors_say_what_is_missing(machine):
    q, m = machine
    r = m.read()
    assert r.missing == "Input Monitoring"
    assert SETTINGS_PATH == "System Settings › Privacy & Security › Input Monitoring"
    assert SETTINGS_PATH in r.permission and APP in r.permission
    assert r.problem is None  # the idle counter is read: safe, but the keys are not heard
    st = status_of(r)
    assert st["attention"] == r.permission
    lines = _status_text(st).splitlines()
    assert lines[0].startswith("permission:") and SETTINGS_PATH in lines[0]
    det = next(ln for ln in lines if "detectors:" in ln)
    assert "quartz" in det and "(missing: Input Monitoring" in det
    assert not any(ln.startswith("note:") for ln in lines)  # said once, at the top

    q.granted = True  # the person ticks the box
    wait_for(lambda: m.read().missing is None, what="the grant seen")
    st = status_of(m.read())
    text = _status_text(st)
    assert "permission:" not in text and "missing" not in text and st["attention"] is None


def test_the_trays_heading_says_it_and_one_notification(machine):
    q, m = machine
    st = status_of(m.read())
    heading = next(i for i in build_menu(st) if i.default)
    assert heading.label.startswith("Input Monitoring not granted")
    assert status_line(st).startswith("Input Monitoring not granted")
    notices = Notices()
    first = notices.update(st)  # at the tray's start too
    said = [n for n in first if "Input Monitoring" in n[0]]
    assert len(said) == 1 and SETTINGS_PATH in said[0][1]
    assert not [n for n in notices.update(st) if "Input Monitoring" in n[0]]  # once

    q.granted = True
    wait_for(lambda: m.read().missing is None, what="the grant seen")
    granted = status_of(m.read())
    assert not status_line(granted).startswith("Input Monitoring")
    assert notices.update(granted) == []
    q.granted = False  # taken away again in System Settings: said again, once
    wait_for(lambda: m.read().missing is not None, what="the grant's loss seen")
    again = status_of(m.read())
    assert [n[0] for n in notices.update(again)] == ["Input Monitoring is not granted"]
