"""The idle watchers' D-Bus calls, on a real private session bus with a
stand-in screensaver: an answer comes back as its body, and each way a call can
fail (an error reply, no answer in time, the connection gone) is one
BackendError line that names who did not answer what."""

from __future__ import annotations

import select
import time
from collections import deque

import pytest
from jeepney import MatchRule
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

from owl.idle import dbuscall
from owl.idle.base import BackendError
from support.need import programs
from support.screensaver import Desktop

SAVER = "org.freedesktop.ScreenSaver"
SAVER_PATH = "/org/freedesktop/ScreenSaver"


def test_an_answer_is_its_body_and_an_error_reply_names_who_and_what() -> None:
    programs("dbus-daemon")
    with Desktop(SAVER) as desk, open_dbus_connection(bus=desk.address) as conn:
        assert dbuscall.call(conn, SAVER, SAVER_PATH, SAVER, "GetActive") == (False,)
        with pytest.raises(BackendError) as e:
            dbuscall.call(conn, SAVER, SAVER_PATH, SAVER, "Lock", who="the screensaver")
        assert str(e.value) == (
            "the screensaver answered Lock with org.freedesktop.DBus.Error.UnknownMethod"
        )
        with pytest.raises(BackendError) as e:
            dbuscall.call(conn, *dbuscall.BUS, "GetNameOwner", "s", ("org.example.Nobody",))
        assert str(e.value) == (
            "org.freedesktop.DBus answered GetNameOwner with "
            "org.freedesktop.DBus.Error.NameHasNoOwner"
        )


def test_a_peer_that_never_answers_is_given_up_on_after_the_call_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    programs("dbus-daemon")
    monkeypatch.setattr(dbuscall, "CALL_TIMEOUT", 0.3)
    with (
        Desktop(SAVER) as desk,
        open_dbus_connection(bus=desk.address) as silent,
        open_dbus_connection(bus=desk.address) as conn,
    ):
        # A peer that owns a name and never reads what it is sent.
        silent.send_and_get_reply(message_bus.RequestName("org.example.Silent"), timeout=5)
        with pytest.raises(BackendError) as e:
            dbuscall.call(conn, "org.example.Silent", "/", "org.example.Silent", "Hello")
        assert str(e.value) == "org.example.Silent did not answer Hello"


def test_a_closed_connection_is_one_line_not_a_crash() -> None:
    programs("dbus-daemon")
    with Desktop(SAVER) as desk:
        conn = open_dbus_connection(bus=desk.address)
        conn.close()
        with pytest.raises(BackendError) as e:
            dbuscall.call(conn, SAVER, SAVER_PATH, SAVER, "GetActive")
        assert str(e.value).startswith("the D-Bus connection went away: ")
        assert "\n" not in str(e.value)


def test_a_matched_signal_is_sorted_into_its_queue_by_a_drain() -> None:
    programs("dbus-daemon")
    with Desktop(SAVER) as desk, open_dbus_connection(bus=desk.address) as conn:
        rule = MatchRule(type="signal", interface=SAVER, member="ActiveChanged")
        signals: deque = deque()
        conn.filter(rule, queue=signals)
        dbuscall.add_match(conn, rule)
        desk.lock()  # the signal is on the bus; only a drain reads it off the socket
        deadline = time.monotonic() + 5
        while not signals and time.monotonic() < deadline:
            select.select([conn.sock], [], [], 0.1)
            dbuscall.drain(conn)
        assert [tuple(m.body) for m in signals] == [(True,)]
