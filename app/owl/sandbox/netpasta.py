"""pasta attached to a Run's namespace, and ended with it (loaded by
``netns.py``, standard library only).

Why a module of its own: how pasta is started (its options, the paths it is
named, its pid read back, the DNS forward it may not know) is pasta's
matter alone; ``netns.py`` decides when, and with which ports.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.sandbox import netdns, netproc
else:  # run by netns.py as a script (-I -S): its siblings, already on the path
    import netdns
    import netproc


def start(
    pasta: str, ports: str, holder: int, folder: str, dns: list[str], userns: bool
) -> tuple[str | None, int | None]:
    """Attach pasta to the namespaces of bwrap's child: (why not or None, a
    pidfd of pasta as it runs on in the background).

    pasta is handed real paths, never fds: newer pastas (Debian 13's) close
    every inherited fd as they start, so ``/proc/self/fd/N`` names nothing by
    the time they open it ("Couldn't open PID file /proc/self/fd/8"). The
    namespaces are named by the ``/proc/PID/ns`` of ``holder``, a process of
    ours that has joined them and stays until pasta has started (``netns.py``'s holder):
    bwrap's child is not dumpable while it waits, so pasta, which drops its
    capabilities first, cannot open its ``/proc/PID/ns`` (measured), nor
    (run by root) the fds of this helper, which keeps root's capabilities
    (measured: EACCES); the holder is dumpable, and its own user's in the
    Run's user namespace. ``--no-netns-quit``: pasta stays once the holder
    has gone. Its pid comes back in a file of ``folder`` (this helper's own,
    0700): pasta stays after the sandbox's last process has gone (measured),
    so it is ended here then.

    ``dns``: pasta's options that forward DNS to the host's resolver, on its
    loopback (``netdns.py``). A pasta that fails with them (Debian 12's has
    no ``--dns-host``: "unrecognized option") is started again without, and
    the Run keeps the host's resolv.conf: a network without names rather
    than none.

    It starts with SIGTERM blocked: it has a handler of its own for it, which
    an inherited SIG_IGN does not stop."""
    forward = ports if ports != "-" else "none"
    argv = [
        pasta,
        "--config-net",
        "--quiet",
        "--no-map-gw",
        "-t",
        "none",
        "-u",
        "none",
        "-T",
        forward,
        "-U",
        "none",
    ]
    if netdns.ipv4_default():
        argv.append("-4")  # IPv4 only: its start takes half the time (measured 45 -> 28 ms)
    tail: list[str] = []
    if os.getuid() == 0:
        tail += ["--runas", "0"]  # else it drops to nobody, and cannot join
    if userns:
        tail += ["--userns", f"/proc/{holder}/ns/user"]
    pid_file = os.path.join(folder, "pasta.pid")
    tail += ["--pid", pid_file, "--netns", f"/proc/{holder}/ns/net", "--no-netns-quit"]
    why, fd = _start_pasta([*argv, *dns, *tail], pid_file)
    if why is not None and dns:  # the network matters more than its names
        netdns.keep_hosts(folder)
        why, fd = _start_pasta([*argv, *tail], pid_file)
    return why, fd


def _start_pasta(argv: list[str], pid_file: str) -> tuple[str | None, int | None]:
    """pasta started with ``argv``: (why not or None, its pidfd)."""
    try:
        err_r, err_w = os.pipe()
        try:
            child = netproc.spawn(argv, quiet=err_w, block=True)
        finally:
            os.close(err_w)
    except OSError as e:
        return str(e), None
    code = netproc.wait(child, netproc.READY_TIMEOUT)
    if code is None:
        os.kill(child, signal.SIGKILL)
        netproc.wait(child)
    err = netproc.read_now(err_r)
    said = _read_file(pid_file)
    try:  # read: a helper killed later leaves no more than its folder
        os.unlink(pid_file)
    except OSError:
        pass
    if code != 0:
        lines = [ln for ln in err.splitlines() if "syslog" not in ln and "AVX2" not in ln]
        return (lines[-1] if lines else f"exit {code}"), None
    return None, _pidfd(int(said), pid_file) if said.isdigit() else None


def _read_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(64).decode(errors="replace").strip()
    except OSError:
        return ""


def _pidfd(pid: int, pid_file: str) -> int | None:
    """A pidfd of ``pid`` if it is the pasta started with ``pid_file`` (a path
    of this helper's own folder, in its arguments whatever runs it: its
    re-execution as passt.avx2, a loader): signalled through it later, never
    a process that took the pid over once pasta was gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            same = os.fsencode(pid_file) in f.read().split(b"\0")
    except OSError:
        same = False
    if not same:
        os.close(fd)
        return None
    return fd


class Pasta:
    """pasta running in the background for the sandbox, by its pidfd."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def end(self) -> None:
        try:
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)  # nothing left to carry
        except OSError:
            pass
        os.close(self.fd)
