"""The screen lock as the daemon's watch hears it, on a real private session bus
with a stand-in screensaver: only the owner of a screensaver's name is believed."""

from __future__ import annotations

from owl.idle.screenlock import ScreenLock, ScreenSaverSource
from owlproc import wait_for
from support.need import programs
from support.screensaver import Desktop


def test_only_the_owner_of_the_name_is_believed() -> None:
    programs("dbus-daemon")
    fd, gnome = "org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver"
    with Desktop(gnome, fd) as desk:
        lock = ScreenLock([ScreenSaverSource(desk.address)])
        said: list[bool | None] = []
        lock.start(lambda: said.append(lock.locked))
        try:
            wait_for(lambda: said == [False], what="GetActive at start")
            # Anyone on the bus may emit a screensaver's signal; neither
            # connection here owns the name it speaks for.
            desk.spoof(gnome, True)
            desk.spoof(fd, True)
            desk.lock(name=gnome)
            wait_for(lambda: said == [False, True], what="the real lock")
            desk.lock(False, name=gnome)  # had a spoof been believed: still locked
            wait_for(lambda: said == [False, True, False], what="the real unlock")
            assert lock.heard == ["screensaver"]
        finally:
            lock.stop()
        assert said[-1] is None  # stopped: it says nothing any more
