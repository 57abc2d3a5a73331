"""A network namespace of the test's own that stands in for the person's
machine: its "host" addresses, a link-local one, listeners on all of them, a
resolver on its loopback, and a daemon started inside it. No packet leaves
this machine: the namespace's interfaces are a veth pair of its own.

``ip netns exec`` gives what it starts a mount namespace of its own with
``/etc/netns/NAME/resolv.conf`` laid over ``/etc/resolv.conf``: the daemon
there sees the stand-in resolver (127.0.0.53, as systemd-resolved's stub),
and so does every pasta it starts. Where the machine's ``/dev/net/tun`` is
root's alone (this one's is 0600), a node of the same device, open to all, is
laid over it in that mount namespace only, so a second user's pasta can run
as on a desktop."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.need import missing, programs

PORT = 47077
# The stand-in host: its LAN address (the default route's), a second
# interface's (a bridge's, a VPN's), a link-local one, and IPv6 alike; and
# a link-local address of another machine on its link (a cloud's metadata
# service: the other end of the host's interface).
LAN, OTHER, LINK_LOCAL = "10.77.0.2", "10.88.0.2", "169.254.77.77"
LAN6, OTHER6, GATEWAY6 = "fd77::2", "fd88::2", "fd77::1"
METADATA = "169.254.169.254"
# Where the default route is IPv6's alone, its gateway is a router's
# link-local address, as on most IPv6 networks (pasta gives it the Run).
GATEWAY6_LINK = "fe80::1"
NAME, ADDRESS = "owl-test.example", "10.99.0.9"  # what the stand-in resolver answers
# "The internet": a namespace beyond the stand-in host's, reached through it,
# with a host for an allowed name and one for a name not allowed.
ALLOWED, DENIED = "allowed.example", "denied.example"
ALLOWED_AT, DENIED_AT = "198.51.100.10", "198.51.100.11"
INTERNET6 = "2001:db8:51::10"  # the internet's host, by IPv6

SERVER = r"""
import socket, sys, threading
def serve(s):
    while True:
        c, _ = s.accept()
        with c:
            c.sendall(b"hello")
names = dict(kv.split("=") for kv in sys.argv[3].split(",")) if sys.argv[2] == "dns" else {}
def dns(s):
    while True:
        q, peer = s.recvfrom(512)
        name = q[12:q.index(b"\0", 12) + 5]
        labels, i = [], 12
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode())
            i += 1 + q[i]
        asked = ".".join(labels).lower()
        addr = bytes(int(x) for x in names.get(asked, names["*"]).split("."))
        if name[-4:-2] != b"\x00\x01":  # not an A query: no such record, at once
            s.sendto(q[:2] + b"\x81\x80" + q[4:6] + b"\x00\x00\x00\x00\x00\x00" + name, peer)
            continue
        answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + addr
        s.sendto(q[:2] + b"\x81\x80" + q[4:6] + b"\x00\x01\x00\x00\x00\x00" + name + answer, peer)
port = int(sys.argv[1])
for family, host in ((socket.AF_INET6, "::"),):
    s = socket.socket(family)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((host, port))
    s.listen(16)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
if sys.argv[2] == "dns":
    d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    d.bind(("127.0.0.53", 53))
    threading.Thread(target=dns, args=(d,), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class TestNet:
    name: str
    tun: Path  # a tun node open to all, laid over /dev/net/tun inside

    def prefix(self, user: str | None = None, tun: bool = True) -> list[str]:
        """What starts a command inside the namespace (as ``user``, if named;
        with the machine's own /dev/net/tun unless ``tun``)."""
        lay = f'mount --bind "{self.tun}" /dev/net/tun && exec "$@"' if tun else 'exec "$@"'
        who = (
            []
            if user is None
            else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
        )
        return ["ip", "netns", "exec", self.name, "sh", "-c", lay, "sh", *who]


def _ip(*args: str, name: str | None = None) -> None:
    argv = ["ip", *(["-n", name] if name else []), *args]
    subprocess.run(argv, check=True, capture_output=True)


@contextlib.contextmanager
def test_net(*, ipv4: bool = True) -> Iterator[TestNet]:
    """The stand-in machine, with a listener on every one of its addresses
    (port ``PORT``, answering ``hello``) and a resolver on 127.0.0.53 that
    answers ``NAME`` with ``ADDRESS``. ``ipv4=False``: the machine's default
    route is IPv6's only, through a link-local gateway (pasta then gives the
    Run IPv6 too); its IPv4 addresses stay (pasta copies them to the Run)."""
    programs("ip", "setpriv", "mount")
    if os.geteuid() != 0:
        missing("a network namespace of the test's own needs root")
    name = f"owltest{os.getpid()}"
    folder = Path(tempfile.mkdtemp(prefix="owl-testnet-"))
    folder.chmod(0o755)
    etc = Path("/etc/netns") / name
    inet = f"{name}i"
    _ip("netns", "add", name)
    servers: list[subprocess.Popen] = []
    try:
        etc.mkdir(parents=True)
        (etc / "resolv.conf").write_text("nameserver 127.0.0.53\noptions edns0\n")
        tun = folder / "tun"
        os.mknod(tun, 0o20666, os.makedev(10, 200))
        tun.chmod(0o666)
        _ip("link", "set", "lo", "up", name=name)
        _ip("link", "add", "eth0", "type", "veth", "peer", "name", "br0", name=name)
        for dev in ("eth0", "br0"):
            _ip("link", "set", dev, "up", name=name)
        _ip("addr", "add", f"{LAN}/24", "dev", "eth0", name=name)
        _ip("addr", "add", f"{LINK_LOCAL}/16", "dev", "eth0", name=name)
        _ip("addr", "add", f"{OTHER}/24", "dev", "br0", name=name)
        _ip("addr", "add", f"{METADATA}/16", "dev", "br0", name=name)
        _ip("-6", "addr", "add", f"{LAN6}/64", "dev", "eth0", "nodad", name=name)
        _ip("-6", "addr", "add", f"{OTHER6}/64", "dev", "br0", "nodad", name=name)
        if ipv4:
            _ip("route", "add", "default", "via", "10.77.0.1", "dev", "eth0", name=name)
        gateway6 = GATEWAY6 if ipv4 else GATEWAY6_LINK
        _ip("-6", "route", "add", "default", "via", gateway6, "dev", "eth0", name=name)
        _ip("netns", "add", inet)
        _ip("link", "add", "up0", "type", "veth", "peer", "name", "down0", name=name)
        _ip("link", "set", "down0", "netns", inet, name=name)
        _ip("link", "set", "up0", "up", name=name)
        _ip("addr", "add", "198.51.100.1/24", "dev", "up0", name=name)
        _ip("-6", "addr", "add", "2001:db8:51::1/64", "dev", "up0", "nodad", name=name)
        _ip("link", "set", "lo", "up", name=inet)
        _ip("link", "set", "down0", "up", name=inet)
        for at in (ALLOWED_AT, DENIED_AT):
            _ip("addr", "add", f"{at}/24", "dev", "down0", name=inet)
        _ip("-6", "addr", "add", f"{INTERNET6}/64", "dev", "down0", "nodad", name=inet)
        names = f"{NAME}={ADDRESS},{ALLOWED}={ALLOWED_AT},{DENIED}={DENIED_AT},*={ADDRESS}"
        for where, dns in ((name, names), (inet, "-")):
            server = subprocess.Popen(
                ["ip", "netns", "exec", where, sys.executable, "-I", "-c", SERVER, str(PORT)]
                + ["dns" if dns != "-" else "-", dns],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            servers.append(server)
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield TestNet(name, tun)
    finally:
        for server in servers:
            server.kill()
            server.wait()
        for ns in (name, inet):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(etc, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


def link_local6(net: TestNet) -> str:
    """The stand-in host's own IPv6 link-local address on its LAN interface."""
    out = subprocess.run(
        ["ip", "-n", net.name, "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split("inet6 ", 1)[1].split("/", 1)[0]
