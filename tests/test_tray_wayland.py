"""The tray on Wayland: a StatusNotifierItem (appindicator), with no X display at all.

Real parts: a headless sway (the Wayland display GTK opens), a session bus
with Debian's `status-notifier-watcher` (org.kde.StatusNotifierWatcher) and a
host registered with it, as a panel would, dunst for notifications, and the
real `owl tray` (daemon and tray in one process). The test reads what a
panel reads: the watcher's registered items, the item's properties, and its
menu through com.canonical.dbusmenu, and clicks an entry the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from compositors import Compositor, compositor, require
from display import _bus_name_owned, _stop, _wait_for
from owlproc import OWL, Unmet, wait_for

pytestmark = pytest.mark.timeout(90)

WATCHER = "org.kde.StatusNotifierWatcher"


def _needs(*programs: str) -> None:
    gone = [p for p in programs if shutil.which(p) is None]
    if gone:
        text = f"not installed: {', '.join(gone)} (tools/setup.sh --test installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(text)
        pytest.skip(text)


class Panel:
    """What a desktop panel is on the bus: a StatusNotifier host, reading items."""

    def __init__(self, bus: str) -> None:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection

        self.conn = open_dbus_connection(bus=bus)
        self.name = f"org.kde.StatusNotifierHost-{os.getpid()}"
        self.conn.send_and_get_reply(message_bus.RequestName(self.name), timeout=5)
        self.call(self.watcher(), "RegisterStatusNotifierHost", "s", (self.name,))

    @staticmethod
    def watcher() -> Any:
        from jeepney import DBusAddress

        return DBusAddress("/StatusNotifierWatcher", bus_name=WATCHER, interface=WATCHER)

    def call(
        self, address: Any, method: str, signature: str | None = None, body: tuple = ()
    ) -> tuple:
        from jeepney import MessageType, new_method_call

        reply = self.conn.send_and_get_reply(
            new_method_call(address, method, signature, body), timeout=5
        )
        if reply.header.message_type is MessageType.error:
            raise AssertionError(f"{method}: {reply.body}")
        return tuple(reply.body)

    def prop(self, address: Any, name: str) -> Any:
        from jeepney import Properties

        reply = self.conn.send_and_get_reply(Properties(address).get(name), timeout=5)
        return reply.body[0][1]

    def items(self) -> list[str]:
        return list(self.prop(self.watcher(), "RegisteredStatusNotifierItems"))

    def item(self, service: str) -> Any:
        """The StatusNotifierItem object a service exports (appindicator's own path)."""
        from jeepney import DBusAddress

        root = "/org/ayatana/NotificationItem"
        xml = self.call(
            DBusAddress(root, bus_name=service, interface="org.freedesktop.DBus.Introspectable"),
            "Introspect",
        )[0]
        child = re.findall(r'<node name="([^"]+)"', xml)
        assert child, f"{service} exports nothing under {root}"
        return DBusAddress(
            f"{root}/{child[0]}", bus_name=service, interface="org.kde.StatusNotifierItem"
        )

    def pid_of(self, service: str) -> int:
        from jeepney import DBusAddress

        bus = DBusAddress(
            "/org/freedesktop/DBus",
            bus_name="org.freedesktop.DBus",
            interface="org.freedesktop.DBus",
        )
        return int(self.call(bus, "GetConnectionUnixProcessID", "s", (service,))[0])

    def close(self) -> None:
        self.conn.close()


def labels(layout: tuple) -> dict[str, int]:
    """Every labelled entry of a dbusmenu layout (id, props, children), label -> id."""
    out: dict[str, int] = {}

    def walk(node: Any) -> None:
        ident, props, children = node
        if "label" in props:
            out[props["label"][1]] = ident
        for _sig, child in children:
            walk(child)

    walk(layout)
    return out


@pytest.fixture
def wayland_desktop(tmp_path: Path) -> Iterator[Compositor]:
    require("sway")
    _needs("status-notifier-watcher", "dunst")
    with compositor("sway") as c:
        bus = c.env["DBUS_SESSION_BUS_ADDRESS"]
        started = []
        try:
            for argv, name in (
                (["status-notifier-watcher"], WATCHER),
                (["dunst"], "org.freedesktop.Notifications"),
            ):
                proc = subprocess.Popen(
                    argv,
                    env=c.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                started.append(proc)
                _wait_for(_bus_name_owned(bus, name), argv[0], proc)
            yield c
        finally:
            for proc in reversed(started):
                _stop(proc)


def test_tray_registers_a_status_notifier_item_and_exports_its_menu_with_no_x(
    tmp_path: Path, wayland_desktop: Compositor
) -> None:
    c = wayland_desktop
    panel = Panel(c.env["DBUS_SESSION_BUS_ADDRESS"])
    try:
        assert panel.prop(panel.watcher(), "IsStatusNotifierHostRegistered") is True
        assert panel.items() == []
        env = dict(
            c.env,
            OWL_HOME=str(tmp_path / "home"),
            OWL_MACHINE="manual",
            XDG_CONFIG_HOME=str(tmp_path / "config"),
        )
        for key in ("DISPLAY", "PYSTRAY_BACKEND"):
            env.pop(key, None)
        log = tmp_path / "tray.log"
        tray = subprocess.Popen(
            [*OWL, "tray"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        try:
            items = wait_for(panel.items, timeout=20, what="Owl's item to be registered")
            assert len(items) == 1
            service = items[0].partition("/")[0]
            assert panel.pid_of(service) == tray.pid  # the tray process itself
            item = panel.item(service)
            assert panel.prop(item, "Id") == "owl"
            assert panel.prop(item, "Status") == "Active"
            assert panel.prop(item, "Title").startswith("Owl")

            from jeepney import DBusAddress

            menu = DBusAddress(
                panel.prop(item, "Menu"), bus_name=service, interface="com.canonical.dbusmenu"
            )
            wanted = ("Start", "Pause", "Work for 1 hour", "Stop", "Start at login", "Quit")

            def menu_entries() -> dict[str, int] | Unmet:
                # the menu is filled once the tray has first read the daemon
                _rev, layout = panel.call(menu, "GetLayout", "iias", (0, -1, []))
                entries = labels(layout)
                return entries if all(w in entries for w in wanted) else Unmet(sorted(entries))

            entries = wait_for(menu_entries, timeout=20, what="the menu's entries")

            # A click the way a panel sends it reaches the daemon: Owl pauses.
            panel.call(menu, "Event", "isvu", (entries["Pause"], "clicked", ("s", ""), 0))
            status = [*OWL, "status", "--json"]
            wait_for(
                lambda: (
                    '"paused": true'
                    in subprocess.run(status, env=env, capture_output=True, text=True).stdout
                ),
                what="the click on Pause to pause Owl",
            )

            tray.send_signal(signal.SIGTERM)
            assert tray.wait(15) == 0, log.read_text()
            wait_for(lambda: panel.items() == [], what="the item to leave the watcher")
        finally:
            if tray.poll() is None:
                tray.kill()
                tray.wait(5)
        assert "tray stopped with an error" not in log.read_text(), log.read_text()
    finally:
        panel.close()


def test_on_wayland_without_a_status_notifier_host_the_tray_says_what_gnome_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from owl.tray.app import TrayUnavailable, choose_backend

    require("sway")
    with compositor("sway") as c:
        for key, value in c.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("DISPLAY", raising=False)
        monkeypatch.delenv("PYSTRAY_BACKEND", raising=False)
        with pytest.raises(TrayUnavailable, match="AppIndicator extension"):
            choose_backend(None, wait_s=0.3)
        with pytest.raises(TrayUnavailable, match="on Wayland use appindicator"):
            choose_backend("gtk", wait_s=0)


def test_a_tray_whose_toolkit_fails_at_start_exits_instead_of_hanging(tmp_path: Path) -> None:
    # The notification service the desktop offers cannot start (it exits at
    # once), so pystray's appindicator loop fails before it is ready.
    _needs("status-notifier-watcher")
    broken = {"org.freedesktop.Notifications": "/bin/false"}
    with compositor("sway", bus_services=broken) as c:
        bus = c.env["DBUS_SESSION_BUS_ADDRESS"]
        watcher = subprocess.Popen(
            ["status-notifier-watcher"],
            env=c.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_for(_bus_name_owned(bus, WATCHER), "status-notifier-watcher", watcher)
            env = dict(c.env, OWL_HOME=str(tmp_path / "home"), OWL_MACHINE="manual")
            env.pop("DISPLAY", None)
            log = tmp_path / "tray.log"
            tray = subprocess.Popen(
                [*OWL, "tray"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log.open("wb"),
            )
            try:
                assert tray.wait(20) == 0, log.read_text()
            finally:
                if tray.poll() is None:
                    tray.kill()
                    tray.wait(5)
            assert "tray stopped with an error" in log.read_text()
        finally:
            _stop(watcher)
