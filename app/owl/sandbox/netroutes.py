"""Close the host's own addresses and link-local to a Run's network namespace
(run as a script by ``netns.py``, not imported by the daemon).

    python -I -S netroutes.py READY HOLD [PREFIX ...]

It reads one line from the fd HOLD, ``USERNS NETNS``: the paths of the
namespaces of bwrap's child (USERNS ``-``: none of its own to join, as for
root where none could be made); it is started before bwrap, and gets ready
meanwhile. Each PREFIX (``192.0.2.0/24``, ``fd00::2/128``) is closed besides
the defaults. Once the routes are laid it writes ``ready`` on the fd READY
and stays, in the Run's namespaces, until HOLD reads its end: while it
stays, its ``/proc/PID/ns/net`` and ``/user`` name them for pasta (see
``netns.py``). On failure it says why on stderr and exits 1.

Why: pasta (and slirp4netns) carries whatever the Run sends to any address
out through the host's own sockets, so from inside a Run a listener on a
link-local address answered (a cloud machine's metadata service at
169.254.169.254 hands out its credentials there), and so does every service
of the host bound to 0.0.0.0, reached through another of the host's addresses
(a second interface's, a bridge's, a VPN's). A ``prohibit`` route for each in
the namespace's own table makes the kernel refuse them inside, before pasta
sees a packet: ``connect()`` fails at once with EACCES. The host's 127.0.0.1
ports the config names are reached through pasta's own forwarding (``-T``),
not by address, and stay.

Link-local is closed by a policy rule as well (``prohibit`` ahead of the
main table, after the local one): a route cannot close it whole. The kernel
lays ``fe80::/64 dev eth0`` on the Run's interface, longer than any prohibit
route but one of the same /64 (which the kernel then picks by metric, or by
interface when the address names its zone), and pasta carried a connection to
``fe80::…%eth0`` out to the host's link; Debian 13's pasta copies each of the
host's addresses, a 169.254 one too, and the ``169.254.0.0/16 dev eth0``
route that comes with it answered for 169.254.169.254 on the host's link. A
rule is looked up before any table, for any interface a socket names, and
after the local table, so the Run's own addresses stay its own. NDP (to
pasta's gateway, link-local on most hosts) is not routed and still works.

The routes are laid before the agent starts and while bwrap's child still
waits, by this process joining the namespaces (it owns the Run's user
namespace, so it has every capability there; the agent has none, so it
cannot take them away). Standard library only, started with ``-I -S``: it
runs beside pasta's start, not after it.

The host's addresses are read as the Run starts (``/proc/net/fib_trie``,
``/proc/net/if_inet6``): one the host gains later (a VPN brought up during
the Run) is not closed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# Always closed: IPv4 and IPv6 link-local.
LINK_LOCAL = ("169.254.0.0/16", "fe80::/10")

RTM_NEWROUTE, RTM_NEWRULE = 24, 32
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
NLMSG_ERROR = 2
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_PROHIBIT = 254, 4, 0, 8
RTA_DST = 1
FR_ACT_PROHIBIT, FRA_DST, FRA_PRIORITY = 8, 1, 6
# The rules' place: after the local table's rule (0), so the Run's own
# addresses stay reachable by itself, and before the main table's (32766).
RULE_PRIORITY = 100


def host_addresses(fib_trie: str, if_inet6: str) -> list[str]:
    """The host's own addresses but loopback's, as prefixes of one address,
    from the texts of ``/proc/net/fib_trie`` and ``/proc/net/if_inet6``."""
    out: list[str] = []
    last = ""
    for line in fib_trie.splitlines():
        word = line.strip()
        if word.startswith(("|--", "+--")):
            last = word.split()[1]
        elif word == "/32 host LOCAL" and last:
            out.append(f"{last}/32")
    for line in if_inet6.splitlines():
        parts = line.split()
        if parts and len(parts[0]) == 32:
            addr = ipaddress.IPv6Address(bytes.fromhex(parts[0]))
            out.append(f"{addr}/128")
    return [p for p in dict.fromkeys(out) if not _skipped(p)]


def _skipped(prefix: str) -> bool:
    """Loopback is the Run's own inside; link-local is closed whole anyway."""
    net = ipaddress.ip_network(prefix, strict=False)
    return net.is_loopback or net.is_link_local


def route_message(prefix: str, seq: int) -> bytes:
    """An RTM_NEWROUTE netlink request: ``prohibit PREFIX`` in the main table."""
    net = ipaddress.ip_network(prefix, strict=False)
    family = socket.AF_INET if net.version == 4 else socket.AF_INET6
    dst = net.network_address.packed
    rtmsg = struct.pack(
        "BBBBBBBBI",
        family,
        net.prefixlen,
        0,
        0,
        RT_TABLE_MAIN,
        RTPROT_STATIC,
        RT_SCOPE_UNIVERSE,
        RTN_PROHIBIT,
        0,
    )
    return _request(RTM_NEWROUTE, seq, rtmsg + _attr(RTA_DST, dst))


def rule_message(prefix: str, seq: int) -> bytes:
    """An RTM_NEWRULE netlink request: ``to PREFIX prohibit``, at
    ``RULE_PRIORITY`` (as ``ip rule add to PREFIX prohibit pref 100``)."""
    net = ipaddress.ip_network(prefix, strict=False)
    family = socket.AF_INET if net.version == 4 else socket.AF_INET6
    # struct fib_rule_hdr: family, dst_len, src_len, tos, table, res1, res2, action, flags
    hdr = struct.pack("BBBBBBBBI", family, net.prefixlen, 0, 0, 0, 0, 0, FR_ACT_PROHIBIT, 0)
    attrs = _attr(FRA_DST, net.network_address.packed)
    attrs += _attr(FRA_PRIORITY, struct.pack("I", RULE_PRIORITY))
    return _request(RTM_NEWRULE, seq, hdr + attrs)


def _attr(kind: int, value: bytes) -> bytes:
    """A netlink attribute (every value here is 4 or 16 bytes: no padding)."""
    return struct.pack("HH", 4 + len(value), kind) + value


def _request(kind: int, seq: int, body: bytes) -> bytes:
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return struct.pack("IHHII", 16 + len(body), kind, flags, seq, 0) + body


def _setns(fd: int, kind: int) -> None:
    setns = getattr(os, "setns", None)  # Python 3.12+
    if setns is not None:
        setns(fd, kind)
        return
    import ctypes  # only here: 3.11 has no os.setns

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def drop_capabilities() -> None:
    """Give up every capability (capset with all sets empty). For root where
    the Run has no user namespace of its own: pasta, which drops its own
    before it opens a namespace path, may open this process's only when this
    process holds no more than it does (measured: EACCES)."""
    import ctypes

    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if ctypes.CDLL(None, use_errno=True).capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def join(userns: str, netns: str) -> None:
    """Join the Run's namespaces: its user namespace first (where this
    process, its owner, has every capability), then its network namespace."""
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in (userns, netns) if p != "-"]
    try:
        if userns != "-":
            _setns(fds[0], CLONE_NEWUSER)
        _setns(fds[-1], CLONE_NEWNET)
    finally:
        for fd in fds:
            os.close(fd)


def prohibit(prefixes: list[str], rules: tuple[str, ...] = LINK_LOCAL) -> None:
    """Lay a ``prohibit`` route for each prefix in the current namespace, and
    a ``prohibit`` rule for each of ``rules``."""
    asks = [(route_message, p, f"prohibit {p}") for p in prefixes]
    asks += [(rule_message, p, f"rule to {p} prohibit") for p in rules]
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as s:
        for seq, (message, prefix, what) in enumerate(asks, 1):
            s.send(message(prefix, seq))
            reply = s.recv(65536)
            kind = struct.unpack_from("H", reply, 4)[0]
            if kind != NLMSG_ERROR:
                continue
            err = -struct.unpack_from("i", reply, 16)[0]
            if err not in (0, 17):  # 17: EEXIST, laid already
                raise OSError(err, f"{os.strerror(err)}: {what}")


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


def main(argv: list[str]) -> int:
    ready, hold, extra = int(argv[0]), int(argv[1]), argv[2:]
    mine = host_addresses(_read("/proc/net/fib_trie"), _read("/proc/net/if_inet6"))
    prefixes = list(dict.fromkeys([*LINK_LOCAL, *mine, *extra]))
    if not hasattr(os, "setns"):
        import ctypes  # noqa: F401  (imported now, while bwrap starts)
    told = _line(hold).split()
    if len(told) != 2:
        return 0  # bwrap did not start: nothing to do
    userns, netns = told
    try:
        join(userns, netns)
        prohibit(prefixes)
        if userns == "-" and os.getuid() == 0:
            drop_capabilities()
    except OSError as e:
        os.write(2, f"{e}\n".encode())
        return 1
    os.write(ready, b"ready\n")
    os.close(ready)
    while os.read(hold, 64):  # until netns.py closes it (or has gone)
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
