"""A real, throw-away desktop for tests: Xvfb, a session D-Bus, and optionally
a tray host (trayer) and a notification daemon (dunst).

    from display import virtual_display, xdotool

    with virtual_display(tray=True, notify=True) as env:
        subprocess.run([...], env=env)        # env is a dict for subprocesses
        xdotool(env, "mousemove", "10", "10")

Every piece is waited for until it really answers (Xvfb accepts clients, the
bus answers, the tray selection is owned, the notification name is owned),
never for a fixed time, and everything is torn down on exit, even when the
test fails. Xvfb picks its own free display number (`-displayfd`), so tests
can run side by side.

For code under test that runs in the test process itself (it reads
`os.environ`), use `env.activate(monkeypatch)` or the `display_fixture`
factory, which does it for you.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from typing import Callable, Iterator

import pytest

from support import need

#: Programs each piece needs; a test is skipped when one is missing (fails under CI).
NEEDS = {"x": ["Xvfb"], "dbus": ["dbus-daemon"], "tray": ["trayer"], "notify": ["dunst"]}

STARTUP_TIMEOUT = 10.0


class DisplayEnv(dict):
    """The environment for processes that should live on the virtual desktop.

    A plain dict (pass it as `env=`), with a few handles for tests that need
    to act on the desktop itself, e.g. kill the X server mid-run.
    """

    display: str
    xvfb: subprocess.Popen
    processes: dict[str, subprocess.Popen]

    #: Variables this env sets or removes in a process (see `activate`).
    OWN_KEYS = ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "NO_AT_BRIDGE", "XDG_SESSION_TYPE")
    DROPPED_KEYS = ("WAYLAND_DISPLAY",)

    def activate(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Point this test process at the virtual desktop (undone after the test)."""
        for key in self.OWN_KEYS:
            if key in self:
                monkeypatch.setenv(key, self[key])
            else:
                monkeypatch.delenv(key, raising=False)
        for key in self.DROPPED_KEYS:
            monkeypatch.delenv(key, raising=False)

    def kill_x(self) -> None:
        """Kill the X server now (SIGKILL) and wait until it is gone."""
        _stop(self.xvfb, sig=signal.SIGKILL)


def missing_programs(*, tray: bool = False, notify: bool = False, dbus: bool = True) -> list[str]:
    """Programs needed for this kind of desktop that are not installed."""
    wanted = NEEDS["x"] + (NEEDS["dbus"] if (dbus or tray or notify) else [])
    wanted += NEEDS["tray"] if tray else []
    wanted += NEEDS["notify"] if notify else []
    return [p for p in wanted if shutil.which(p) is None]


def _wait_for(
    check: Callable[[], bool],
    what: str,
    proc: subprocess.Popen | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> None:
    """Poll `check` until it holds; fail with `what` on timeout or if `proc` dies."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not up after {timeout:.0f}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _read_line_from(fd: int, what: str, proc: subprocess.Popen) -> str:
    """Read one line a child writes to a pipe when it is ready."""
    data = b""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{what}: not up after {STARTUP_TIMEOUT:.0f}s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            chunk = os.read(fd, 256)
            if not chunk:
                raise RuntimeError(f"{what}: exited before it was ready ({proc.poll()})")
            data += chunk
        elif proc.poll() is not None:
            raise RuntimeError(f"{what}: exited with {proc.returncode}")
    return data.decode().strip()


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 5.0) -> None:
    """Stop a child and reap it; SIGKILL if it does not go in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _x_answers(display: str) -> Callable[[], bool]:
    def check() -> bool:
        from Xlib import display as xdisplay, error as xerror

        try:
            xdisplay.Display(display).close()
            return True
        except (xerror.DisplayError, ConnectionError, OSError):
            return False

    return check


def _tray_owned(display: str) -> Callable[[], bool]:
    """True once some client owns the system tray selection of screen 0."""

    def check() -> bool:
        from Xlib import X, display as xdisplay

        d = xdisplay.Display(display)
        try:
            owner = d.get_selection_owner(d.intern_atom("_NET_SYSTEM_TRAY_S0"))
            return owner not in (X.NONE, 0)
        finally:
            d.close()

    return check


def _bus_name_owned(address: str, name: str) -> Callable[[], bool]:
    def check() -> bool:
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        bus = DBusAddress(
            "/org/freedesktop/DBus",
            bus_name="org.freedesktop.DBus",
            interface="org.freedesktop.DBus",
        )
        with open_dbus_connection(bus=address) as conn:
            reply = conn.send_and_get_reply(
                new_method_call(bus, "NameHasOwner", "s", (name,)), timeout=2
            )
            return bool(reply.body and reply.body[0])

    return check


@contextlib.contextmanager
def virtual_display(
    *, tray: bool = False, notify: bool = False, dbus: bool = True, size: str = "1280x800x24"
) -> Iterator[DisplayEnv]:
    """Start Xvfb (+ session bus, + trayer, + dunst) and yield their environment.

    `tray` and `notify` imply `dbus`. Skips the calling test when a program is
    missing (under CI=true, fails it). Everything started here is stopped on exit, in reverse order.
    """
    missing = missing_programs(tray=tray, notify=notify, dbus=dbus)
    if missing:
        need.missing(f"not installed: {', '.join(missing)}")

    started: list[subprocess.Popen] = []
    env = DisplayEnv(os.environ)
    for key in DisplayEnv.DROPPED_KEYS:
        env.pop(key, None)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env["NO_AT_BRIDGE"] = "1"
    env["XDG_SESSION_TYPE"] = "x11"
    env.processes = {}
    try:
        # Xvfb writes its display number to the fd once it accepts clients.
        rfd, wfd = os.pipe()
        try:
            xvfb = subprocess.Popen(
                # -noreset: by default X resets when its last client leaves, and a
                # client connecting during the reset is refused.
                [
                    "Xvfb",
                    "-displayfd",
                    str(wfd),
                    "-screen",
                    "0",
                    size,
                    "-nolisten",
                    "tcp",
                    "-noreset",
                ],
                pass_fds=(wfd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            started.append(xvfb)
            os.close(wfd)
            wfd = -1
            number = _read_line_from(rfd, "Xvfb", xvfb)
        finally:
            os.close(rfd)
            if wfd >= 0:
                os.close(wfd)
        env.display = env["DISPLAY"] = f":{number}"
        env.xvfb = xvfb
        env.processes["xvfb"] = xvfb
        _wait_for(_x_answers(env.display), "Xvfb", xvfb)

        if dbus or tray or notify:
            rfd, wfd = os.pipe()
            try:
                bus = subprocess.Popen(
                    [
                        "dbus-daemon",
                        "--session",
                        "--nofork",
                        "--nopidfile",
                        f"--print-address={wfd}",
                    ],
                    pass_fds=(wfd,),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                started.append(bus)
                os.close(wfd)
                wfd = -1
                env["DBUS_SESSION_BUS_ADDRESS"] = _read_line_from(rfd, "dbus-daemon", bus)
            finally:
                os.close(rfd)
                if wfd >= 0:
                    os.close(wfd)
            env.processes["dbus"] = bus

        if notify:
            dunst = subprocess.Popen(
                ["dunst"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            started.append(dunst)
            env.processes["dunst"] = dunst
            _wait_for(
                _bus_name_owned(env["DBUS_SESSION_BUS_ADDRESS"], "org.freedesktop.Notifications"),
                "dunst",
                dunst,
            )

        if tray:
            trayer = subprocess.Popen(
                [
                    "trayer",
                    "--edge",
                    "top",
                    "--align",
                    "right",
                    "--widthtype",
                    "request",
                    "--height",
                    "24",
                    "--SetDockType",
                    "true",
                    "--transparent",
                    "false",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            started.append(trayer)
            env.processes["trayer"] = trayer
            _wait_for(_tray_owned(env.display), "trayer", trayer)

        yield env
    finally:
        for proc in reversed(started):
            _stop(proc)


def display_fixture(
    *, scope: str = "function", tray: bool = False, notify: bool = False, dbus: bool = True
):
    """Make a pytest fixture yielding a `DisplayEnv` (for subprocesses).

        xenv = display_fixture(scope="module")

    The test process's own environment is pointed at the desktop only in
    function scope (monkeypatch is per test); in wider scopes call
    `env.activate(monkeypatch)` in the test.
    """
    if scope == "function":

        @pytest.fixture
        def _fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[DisplayEnv]:
            with virtual_display(tray=tray, notify=notify, dbus=dbus) as env:
                env.activate(monkeypatch)
                yield env
    else:

        @pytest.fixture(scope=scope)
        def _fixture() -> Iterator[DisplayEnv]:
            with virtual_display(tray=tray, notify=notify, dbus=dbus) as env:
                yield env

    return _fixture


def xdotool(env: dict, *args: str, timeout: float = 10.0) -> None:
    """Run xdotool on the virtual desktop; raise if it fails."""
    if shutil.which("xdotool") is None:
        need.missing("not installed: xdotool")
    subprocess.run(
        ["xdotool", *args],
        env=env,
        check=True,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
