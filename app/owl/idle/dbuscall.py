"""The D-Bus calls the idle watchers make on their own blocking connection.

GNOME's idle monitor (`mutter_watch`) and the screen lockers (`screenlock`)
each own a jeepney connection on an event thread of their own. Every call they
make has the same three ways to fail (no answer in time, the bus gone, an error
reply), and each must become one `BackendError` line that says who did not
answer what, so the watcher can give up on its source and say why in
`owl status`. jeepney is imported inside each function: this module is on
the path of every backend choice, and the CLI never needs D-Bus.
"""

from __future__ import annotations

from typing import Any

from .base import BackendError, one_line

#: How long one call may take before its source is given up on.
CALL_TIMEOUT = 2.0

BUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")


def call(
    conn: Any,
    name: str,
    path: str,
    iface: str,
    method: str,
    signature: str | None = None,
    body: tuple = (),
    *,
    who: str | None = None,
) -> tuple:
    """One method call on `name`; a D-Bus error or no answer becomes BackendError,
    naming `who` (the bus name unless given) and the method."""
    from jeepney import DBusAddress, MessageType, new_method_call
    from jeepney.low_level import HeaderFields

    who = who or name
    address = DBusAddress(path, bus_name=name, interface=iface)
    try:
        reply = conn.send_and_get_reply(
            new_method_call(address, method, signature, body), timeout=CALL_TIMEOUT
        )
    except TimeoutError:
        raise BackendError(f"{who} did not answer {method}") from None
    except OSError as exc:
        raise BackendError(f"the D-Bus connection went away: {one_line(exc)}") from None
    if reply.header.message_type is MessageType.error:
        err = reply.header.fields.get(HeaderFields.error_name, "an error")
        raise BackendError(f"{who} answered {method} with {err}")
    return tuple(reply.body)


def add_match(conn: Any, rule: Any) -> None:
    """Ask the bus for the signals `rule` matches (a jeepney MatchRule)."""
    call(conn, *BUS, "AddMatch", "s", (rule.serialise(),), who="the bus")


def drain(conn: Any) -> None:
    """Read every message the socket holds now (filters sort them into queues)."""
    while True:
        try:
            conn.recv_messages(timeout=0)
        except TimeoutError:
            return


def owner_rule(name: str) -> Any:
    """A match rule for the bus telling that `name` got a new owner or lost
    it: how a watcher hears its service restart (or go) and re-arms."""
    from jeepney import MatchRule

    rule = MatchRule(
        type="signal",
        sender="org.freedesktop.DBus",
        interface="org.freedesktop.DBus",
        member="NameOwnerChanged",
    )
    rule.add_arg_condition(0, name)
    return rule
