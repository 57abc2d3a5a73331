"""Real, throw-away Wayland compositors for tests: GNOME's mutter, KDE's kwin, sway.

    from compositors import compositor

    with compositor("mutter") as c:
        subprocess.run([...], env=c.env)   # WAYLAND_DISPLAY, the session bus, no DISPLAY
        c.move()                           # input that counts as a person's
        c.kill()                           # the compositor goes away

Each runs headless with a session bus and a runtime folder of its own, and is
waited for until it really answers (its socket accepts clients, its D-Bus
name is owned), never for a fixed time. Input goes the way a person's would
reach the compositor:

- mutter: `org.gnome.Mutter.RemoteDesktop` (an input-only session that lives
  as long as the D-Bus connection that made it);
- kwin: `org_kde_kwin_fake_input`, offered to any client because kwin runs
  with `KWIN_WAYLAND_NO_PERMISSION_CHECKS=1`, from a helper process
  (`support/wl_input.py`: a pywayland client may crash at interpreter exit);
- sway: `swaymsg seat - cursor move` and `wtype`.

`move()` moves the pointer, `key()` types a key (RemoteDesktop's
NotifyKeyboardKeycode, fake-input's keyboard_key, wtype).

A missing program skips the test, except under CI=true, where it fails.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from display import _bus_name_owned, _read_line_from, _stop, _wait_for
from support.sockets import answers

HERE = Path(__file__).resolve().parent
NEEDS = {
    "mutter": ["mutter", "dbus-daemon"],
    "kwin": ["kwin_wayland", "dbus-daemon"],
    "sway": ["sway", "swaymsg", "wtype", "dbus-daemon", "setpriv"],
}
#: What XDG_CURRENT_DESKTOP says in each session.
DESKTOP = {"mutter": "GNOME", "kwin": "KDE", "sway": "sway"}
STARTUP = 20.0
KEY_A = 30  # evdev keycode


def missing(kind: str) -> list[str]:
    return [p for p in NEEDS[kind] if shutil.which(p) is None]


def require(kind: str) -> None:
    """Skip (fail under CI=true) when the compositor's programs are not installed."""
    gone = missing(kind)
    if gone:
        text = f"not installed: {', '.join(gone)} (tools/setup.sh --test installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(text)
        pytest.skip(text)


class Compositor:
    """A running compositor: its environment, input into it, and a way to kill it."""

    def __init__(self, kind: str, env: dict[str, str], proc: subprocess.Popen) -> None:
        self.kind = kind
        self.env = env
        self.proc = proc
        self._n = 0
        self._input: Callable[[int], None] = lambda n: None
        self._key: Callable[[], None] = lambda: None
        self.close_input: Callable[[], None] = lambda: None

    def move(self) -> None:
        """One pointer motion (alternating direction, so it is never a no-op)."""
        self._n += 1
        self._input(self._n)

    def key(self) -> None:
        """One key pressed and released (evdev KEY_A)."""
        self._key()

    def kill(self) -> None:
        """The compositor goes away at once (SIGKILL), and is reaped."""
        self.close_input()
        _stop(self.proc, sig=signal.SIGKILL)


@contextlib.contextmanager
def compositor(kind: str, *, bus_services: dict[str, str] | None = None) -> Iterator[Compositor]:
    """Start one; `bus_services` (D-Bus name -> command) are made activatable on its bus."""
    require(kind)
    started: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix=f"owl-{kind}-") as tmp:
        runtime = Path(tmp) / "runtime"
        runtime.mkdir(mode=0o700)
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "DISPLAY",
                "WAYLAND_DISPLAY",
                "DBUS_SESSION_BUS_ADDRESS",
                "XDG_CURRENT_DESKTOP",
                "SWAYSOCK",
            )
        }
        env.update(
            XDG_RUNTIME_DIR=str(runtime),
            XDG_SESSION_TYPE="wayland",
            XDG_CURRENT_DESKTOP=DESKTOP[kind],
            NO_AT_BRIDGE="1",
        )
        try:
            bus = _session_bus(env, started, _services(Path(tmp), bus_services or {}))
            env["DBUS_SESSION_BUS_ADDRESS"] = bus
            start = {"mutter": _mutter, "kwin": _kwin, "sway": _sway}[kind]
            c = start(env, runtime, Path(tmp), started)
            try:
                yield c
            finally:
                c.close_input()
        finally:
            for proc in reversed(started):
                _stop(proc)


def _services(tmp: Path, services: dict[str, str]) -> list[str]:
    """dbus-daemon arguments for a session bus that can also start `services`."""
    if not services:
        return ["--session"]
    folder = tmp / "services"
    folder.mkdir()
    for name, command in services.items():
        (folder / f"{name}.service").write_text(f"[D-BUS Service]\nName={name}\nExec={command}\n")
    conf = tmp / "session.conf"
    conf.write_text(
        '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"'
        ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
        f"<busconfig><include>/usr/share/dbus-1/session.conf</include>"
        f"<servicedir>{folder}</servicedir></busconfig>\n"
    )
    return [f"--config-file={conf}"]


def _session_bus(env: dict, started: list, how: list[str]) -> str:
    rfd, wfd = os.pipe()
    try:
        bus = subprocess.Popen(
            ["dbus-daemon", *how, "--nofork", "--nopidfile", f"--print-address={wfd}"],
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
        return _read_line_from(rfd, "dbus-daemon", bus)
    finally:
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)


def _socket_up(path: Path) -> Callable[[], bool]:
    return lambda: answers(path)


def _log(tmp: Path, name: str) -> Any:
    return open(tmp / f"{name}.log", "wb")


# ---------------------------------------------------------------- mutter


def _mutter(env: dict, runtime: Path, tmp: Path, started: list) -> Compositor:
    name = "wayland-mutter"
    proc = subprocess.Popen(
        [
            "mutter",
            "--headless",
            "--wayland",
            "--no-x11",
            "--virtual-monitor",
            "1280x720",
            f"--wayland-display={name}",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=_log(tmp, "mutter"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    started.append(proc)
    bus = env["DBUS_SESSION_BUS_ADDRESS"]
    for wanted in ("org.gnome.Mutter.IdleMonitor", "org.gnome.Mutter.RemoteDesktop"):
        _wait_for(_bus_name_owned(bus, wanted), f"mutter ({wanted})", proc, STARTUP)
    env["WAYLAND_DISPLAY"] = str(runtime / name)
    _wait_for(_socket_up(runtime / name), "mutter's Wayland socket", proc, STARTUP)
    c = Compositor("mutter", env, proc)
    c._input, c._key, c.close_input = _remote_desktop(bus)
    return c


def _remote_desktop(
    bus: str,
) -> tuple[Callable[[int], None], Callable[[], None], Callable[[], None]]:
    """An input-only RemoteDesktop session; it ends when its connection closes."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    conn = open_dbus_connection(bus=bus)
    rd = DBusAddress(
        "/org/gnome/Mutter/RemoteDesktop",
        bus_name="org.gnome.Mutter.RemoteDesktop",
        interface="org.gnome.Mutter.RemoteDesktop",
    )
    path = _ok(conn.send_and_get_reply(new_method_call(rd, "CreateSession"), timeout=5))[0]
    session = DBusAddress(
        path,
        bus_name="org.gnome.Mutter.RemoteDesktop",
        interface="org.gnome.Mutter.RemoteDesktop.Session",
    )
    _ok(conn.send_and_get_reply(new_method_call(session, "Start"), timeout=5))

    def send(n: int) -> None:
        step = 5.0 if n % 2 else -5.0
        _ok(
            conn.send_and_get_reply(
                new_method_call(session, "NotifyPointerMotionRelative", "dd", (step, step)),
                timeout=5,
            )
        )

    def key() -> None:
        for pressed in (True, False):
            _ok(
                conn.send_and_get_reply(
                    new_method_call(session, "NotifyKeyboardKeycode", "ub", (KEY_A, pressed)),
                    timeout=5,
                )
            )

    def close() -> None:
        with contextlib.suppress(Exception):
            conn.close()

    return send, key, close


def _ok(reply: Any) -> tuple:
    from jeepney import MessageType

    if reply.header.message_type is MessageType.error:
        raise RuntimeError(f"D-Bus error: {reply.body}")
    return tuple(reply.body)


# ------------------------------------------------------------------ kwin


def _kwin(env: dict, runtime: Path, tmp: Path, started: list) -> Compositor:
    # The packaged binary carries a file capability (cap_sys_resource) that a
    # container may refuse to grant (exec fails with EPERM); a copy has none.
    binary = tmp / "kwin_wayland"
    shutil.copy(shutil.which("kwin_wayland"), binary)  # type: ignore[arg-type]
    name = "wayland-kwin"
    kenv = dict(
        env, QT_QPA_PLATFORM="offscreen", KWIN_COMPOSE="Q", KWIN_WAYLAND_NO_PERMISSION_CHECKS="1"
    )
    proc = subprocess.Popen(
        [
            str(binary),
            "--virtual",
            "--no-lockscreen",
            "--no-global-shortcuts",
            "--no-kactivities",
            "--socket",
            name,
        ],
        env=kenv,
        stdin=subprocess.DEVNULL,
        stdout=_log(tmp, "kwin"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    started.append(proc)
    env["WAYLAND_DISPLAY"] = str(runtime / name)
    _wait_for(_socket_up(runtime / name), "kwin's Wayland socket", proc, STARTUP)
    c = Compositor("kwin", env, proc)
    c._input, c._key, c.close_input = _fake_input(env, started)
    return c


def _fake_input(
    env: dict, started: list
) -> tuple[Callable[[int], None], Callable[[], None], Callable[[], None]]:
    """A helper process holding a fake-input client: one line in, one "ok" out."""
    helper = subprocess.Popen(
        [sys.executable, str(HERE / "support" / "wl_input.py")],
        env=dict(env, PYTHONPATH=str(HERE / "support")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started.append(helper)
    assert helper.stdout is not None and helper.stdin is not None
    line = helper.stdout.readline().strip()
    if line != "ready":
        raise RuntimeError(f"fake-input helper: {line or helper.wait()}")

    def say(line: str) -> None:
        helper.stdin.write(line + "\n")  # type: ignore[union-attr]
        helper.stdin.flush()  # type: ignore[union-attr]
        answer = helper.stdout.readline().strip()  # type: ignore[union-attr]
        if answer != "ok":
            raise RuntimeError(f"fake-input helper: {answer or 'gone'}")

    def close() -> None:
        _stop(helper)

    return (lambda n: say(f"move {5 if n % 2 else -5}")), (lambda: say("key")), close


# ------------------------------------------------------------------ sway


def _sway(env: dict, runtime: Path, tmp: Path, started: list) -> Compositor:
    # sway refuses to run as root: as root, run it (and swaymsg/wtype) as nobody,
    # in a runtime folder nobody owns. The daemon under test, as root, can still
    # open that socket.
    as_user: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(tmp, nobody.pw_uid, nobody.pw_gid)
        os.chown(runtime, nobody.pw_uid, nobody.pw_gid)
        as_user = [
            "setpriv",
            f"--reuid={nobody.pw_uid}",
            f"--regid={nobody.pw_gid}",
            "--clear-groups",
        ]
        env["HOME"] = str(tmp)
    config = tmp / "sway.conf"
    config.write_text("output HEADLESS-1 resolution 1280x720\n")
    config.chmod(0o644)
    senv = dict(env, WLR_BACKENDS="headless", WLR_LIBINPUT_NO_DEVICES="1", WLR_RENDERER="pixman")
    proc = subprocess.Popen(
        [*as_user, "sway", "-c", str(config)],
        env=senv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=tmp,
    )
    started.append(proc)

    def socket_named() -> bool:
        return any(
            p.name.startswith("wayland-") and not p.name.endswith(".lock")
            for p in runtime.iterdir()
        ) and any(p.name.startswith("sway-ipc") for p in runtime.iterdir())

    _wait_for(socket_named, "sway's sockets", proc, STARTUP)
    wl = next(
        p
        for p in runtime.iterdir()
        if p.name.startswith("wayland-") and not p.name.endswith(".lock")
    )
    env["WAYLAND_DISPLAY"] = str(wl)
    env["SWAYSOCK"] = str(next(p for p in runtime.iterdir() if p.name.startswith("sway-ipc")))
    _wait_for(_socket_up(wl), "sway's Wayland socket", proc, STARTUP)
    # sway binds its IPC socket's name a moment before it listens on it (see
    # support/sockets.py): the IPC socket must answer too, not only be there.
    _wait_for(_socket_up(Path(env["SWAYSOCK"])), "sway's IPC socket", proc, STARTUP)
    c = Compositor("sway", env, proc)

    # A move is sent on sway's IPC socket from this process, as `swaymsg seat -
    # cursor move` would send it, not by starting swaymsg: a person's moves
    # must not wait on a program starting on a busy machine (see support/person.py).
    c._input = c.ipc_move = _sway_ipc(Path(env["SWAYSOCK"]))  # type: ignore[attr-defined]
    c._key = lambda: subprocess.run([*as_user, "wtype", "a"], env=env, check=True, timeout=10)
    return c


def _sway_ipc(path: Path) -> Callable[[int], None]:
    """What `swaymsg seat - cursor move` sends, on sway's IPC socket from this process.

    The moment the input is sent is then exact (the benchmark's), without the
    10-100 ms, and on a busy machine sometimes more, of starting swaymsg."""
    import socket
    import struct

    conn = socket.socket(socket.AF_UNIX)
    conn.connect(str(path))
    one_at_a_time = threading.Lock()  # a request and its answer, never interleaved

    def send(n: int) -> None:
        step = 5 if n % 2 else -5
        payload = f"seat - cursor move {step} {step}".encode()
        with one_at_a_time:
            conn.sendall(b"i3-ipc" + struct.pack("=II", len(payload), 0) + payload)
            header = _recv(conn, 14)
            _recv(conn, struct.unpack("=II", header[6:])[0])  # [{"success": true}]

    return send


def _recv(conn: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise RuntimeError("sway closed its IPC socket")
        data += chunk
    return data
