"""The Run's name server where the host's is on its loopback (loaded by
``netns.py`` as a sibling, standard library only).

Why: systemd-resolved's stub answers at 127.0.0.53 (Debian 13, Ubuntu,
Fedora), dnsmasq's at 127.0.0.1, and the Run's own loopback is not the
host's. pasta forwards DNS sent to an address of the namespace's
(``--dns-forward``) to the host's resolver, so the Run's ``/etc/resolv.conf``
is a file written here naming that address; every other line of the host's
file (search, options, its other name servers) is kept.

With an IPv4 default route the Run has IPv4 only (``-4``, see ``netns.py``)
and the address is its gateway (the host's, which pasta gives it): port 53
there is pasta's forward; what else goes there went to the gateway before.

On a host whose only default route is IPv6's the Run may have no IPv4 at all
(measured: none, where the host has no IPv4 address), and a forward keeps its
IP version (``--dns-host`` is per version) while the stub listens on IPv4
alone. The forward is then ``FORWARD6``, reached through the Run's IPv6
default route, and the host's resolver is named to pasta as an IPv4-mapped
IPv6 address (``::ffff:127.0.0.53``), which pasta reaches over IPv4
(measured with Debian 13's pasta). The gateway is not used there: on most
IPv6 networks it is link-local (``fe80::1``), which the Run may not reach.
A pasta that has no ``--dns-host`` (Debian 12's) cannot forward there: the
Run keeps the host's file (`keep_hosts`), and cannot resolve names.
"""

from __future__ import annotations

import os

# An address of no one's (a unique local one, "owl" in its digits), routed
# through pasta by the Run's default route; only port 53 (and 853) of it is
# pasta's forward.
FORWARD6 = "fd6f:776c::53"
RESOLV = "resolv.conf"


def on_loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "0.0.0.0")


def _default_rows() -> list[list[bytes]]:
    """The host's IPv4 default routes (``/proc/net/route``)."""
    try:
        with open("/proc/net/route", "rb") as f:
            rows = [r.split() for r in f.read().splitlines()[1:]]
    except OSError:
        return []
    return [r for r in rows if len(r) > 7 and r[1] == b"00000000"]


def ipv4_default() -> bool:
    """Whether the host has an IPv4 default route: then the Run's network is
    IPv4 only (its start waits no more for IPv6's set-up); a host reached
    over IPv6 alone keeps both."""
    return bool(_default_rows())


def ipv4_gateway() -> str | None:
    """The host's IPv4 default gateway, which pasta gives the Run's
    namespace as its own."""
    for r in _default_rows():
        if r[2] != b"00000000":
            return ".".join(str(b) for b in int(r[2], 16).to_bytes(4, "little"))
    return None


def _host_text() -> str | None:
    try:
        with open("/etc/resolv.conf", "rb") as f:
            return f.read(1 << 16).decode(errors="replace")
    except OSError:
        return None


def _mapped(address: str) -> str:
    """The host's loopback resolver as pasta's IPv6 ``--dns-host``."""
    if ":" in address:
        return address
    return "::ffff:" + ("127.0.0.1" if address == "0.0.0.0" else address)


def resolver(folder: str) -> tuple[list[str], list[str]]:
    """Where the host's resolver is on its loopback: (pasta's options that
    forward DNS to it, the bwrap options that lay a resolv.conf naming the
    forward over the host's); else ([], [])."""
    text = _host_text()
    if text is None:
        return [], []
    lines = text.splitlines()
    servers = [
        ln.split()[1] for ln in lines if ln.split()[:1] == ["nameserver"] and len(ln.split()) > 1
    ]
    local = [a for a in servers if on_loopback(a)]
    if not local:
        return [], []
    gateway = ipv4_gateway()
    if gateway is not None:
        forward, pasta = gateway, ["--dns-forward", gateway]
    elif ipv4_default():
        return [], []  # a default route without a gateway (a point-to-point link's)
    else:
        forward = FORWARD6
        pasta = ["--dns-forward", FORWARD6, "--dns-host", _mapped(local[0])]
    kept = [ln for ln in lines if ln.split()[:1] != ["nameserver"]]
    others = [f"nameserver {a}" for a in servers if not on_loopback(a)][:2]
    path = os.path.join(folder, RESOLV)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, "\n".join([f"nameserver {forward}", *others, *kept, ""]).encode())
    finally:
        os.close(fd)
    return pasta, ["--ro-bind", path, os.path.realpath("/etc/resolv.conf")]


def keep_hosts(folder: str) -> None:
    """Put the host's own text back in the Run's resolv.conf (the same file,
    which bwrap binds by its inode): pasta could not forward DNS."""
    text = _host_text()
    try:
        fd = os.open(os.path.join(folder, RESOLV), os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.write(fd, (text or "").encode())
    finally:
        os.close(fd)
