"""The one duration and clock style every output uses."""

from __future__ import annotations

import time

from hypothesis import given, strategies as st

from owl.rules import timefmt
from owl.settings.config import parse_duration


def test_durations_read_the_same_everywhere():
    assert timefmt.duration(0) == "0s"
    assert timefmt.duration(45) == "45s"
    assert timefmt.duration(599) == "9m 59s"
    assert timefmt.duration(600) == "10m"
    assert timefmt.duration(2 * 3600 + 5 * 60 + 7) == "2h 5m"
    assert timefmt.duration(7200) == "2h"
    assert timefmt.duration(86400 + 3 * 3600) == "1d 3h"
    assert timefmt.duration(3600 + 5) == "1h"  # two units at most, from the largest
    assert timefmt.duration(None) == "?"
    assert timefmt.duration(-3) == "0s"


def test_coarse_rounds_to_the_minute_and_a_countdown_rounds_up():
    assert timefmt.duration(599.4, coarse=True) == "10m"
    assert timefmt.duration(599.4) == "9m 59s"
    assert timefmt.countdown(0.2) == "1s"
    assert timefmt.countdown(0) == "0s"
    assert timefmt.countdown(899.1) == "15m"


def test_relative_times():
    assert timefmt.ago(2) == "just now"
    assert timefmt.ago(45.9) == "45s ago"
    assert timefmt.ago(5 * 60 + 40) == "5m ago"
    assert timefmt.ago(2 * 3600 + 5 * 60 + 59) == "2h 5m ago"
    assert timefmt.ago(3 * 86400 + 60) == "3d ago"


def test_the_clock_is_dated_only_when_not_today():
    now = time.mktime((2026, 12, 1, 15, 0, 0, 0, 0, -1))
    assert timefmt.clock(now - 3600, now) == "14:00"
    assert timefmt.clock(now - 86400, now) == "2026-11-30 15:00"
    assert timefmt.moment(now - 300, now) == "14:55 (5m ago)"
    assert timefmt.parse_iso(time.strftime(timefmt.ISO, time.localtime(now))) == now
    assert timefmt.parse_iso("garbage") is None


@given(st.integers(min_value=1, max_value=10 * 86400))
def test_a_duration_parses_back_to_within_its_least_unit(s):
    text = timefmt.duration(s)
    back = parse_duration(text.replace(" ", ""))
    least = {"s": 1, "m": 60, "h": 3600, "d": 86400}[text[-1]]
    assert 0 <= s - back < least
