"""The network of a Seatbelt Run: an HTTP proxy outside it (run as a script, not imported).

    python -I -S seatnet.py PORTS [--tmp DIR] -- sandbox-exec -p PROFILE env ... COMMAND...

Why a proxy: Seatbelt names an address only as ``*`` or ``localhost`` (``host
must be * or localhost in network address``), and its ``localhost`` is
127.0.0.1 and ::1. A profile that allows ``*`` and then refuses ``localhost``
still lets ``::ffff:127.0.0.1``, ``0.0.0.0``, another 127.x and the Mac's own
LAN address through, each of which reaches the host's Postgres, Redis, Ollama
or an IDE's MCP server. So the profile (``seatbelt.py``) lets the Run reach no
address directly but the 127.0.0.1 ports the Policy names and this proxy's, and
the proxy, outside the sandbox, decides each destination by the address it
resolved to, whatever its spelling: loopback, unspecified, link-local,
multicast and the host's own addresses (any it can bind: its LAN address,
whichever network it is on now) are refused, an IPv4 address
inside an IPv6 one (mapped, compatible, 6to4, NAT64) judged as that IPv4 one.
It connects to the address it judged, so a name that resolves anew (DNS
rebinding) gains nothing. The host's 127.0.0.1 ports in PORTS (``-``: none;
else ``4123,11434``) stay reachable through it too, as directly.

It listens on 127.0.0.1 on a port the system picks; the profile's placeholder
(``seatbelt.EGRESS_PORT``) is replaced by that port, and the command gets
``HTTPS_PROXY``/``HTTP_PROXY`` (``NO_PROXY`` for loopback, reached directly).
CONNECT (HTTPS, git, npm, pip, cargo, go) and plain ``http://`` requests are
served; a program that ignores the proxy variables reaches nothing.

``--tmp DIR``: the Run's temporary folder (``mactemp``), removed once the
command has ended, without following a link the Run left in it. ``PORTS`` is
``none`` for a Run with no network: no proxy, the command started as it is,
its folder removed all the same.

SIGTERM is ignored here (as ``netns.py`` does, for the same reason: it is meant
for the agent, which keeps its network for its 5 s to end); the command gets it
back at its default. The exit status is the command's. Standard library only.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import sys
import threading
from typing import Any

PLACEHOLDER = "OWL_EGRESS_PORT"  # seatbelt.EGRESS_PORT: the profile names it until replaced
HEAD_MOST = 64 * 1024
CONNECT_TIMEOUT = 30.0
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.ip_network("64:ff9b::/96")
Place = tuple[int, tuple[Any, ...]]  # (family, sockaddr) as getaddrinfo gives them


def as_ipv4(ip: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped ``::ffff:a.b.c.d``,
    compatible ``::a.b.c.d``, 6to4 ``2002:aabb:ccdd::``, NAT64 ``64:ff9b::a.b.c.d``),
    else ``ip``: each of them reaches that IPv4 address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    packed = ip.packed
    if ip in NAT64 or (packed[:12] == bytes(12) and int(ip) > 1):
        return ipaddress.IPv4Address(packed[12:])
    return ip


def own(ip: Address) -> bool:
    """Whether ``ip`` is one of this machine's addresses now: only those can
    be bound (asked each time: the Mac's address changes with its network)."""
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((str(ip), 0))
        return True
    except OSError:
        return False


def refused(ip: Address, port: int, ports: frozenset[int]) -> str | None:
    """Why the Run may not reach ``ip``:``port``, or None. The host's loopback
    only on ``ports``; never its own addresses, link-local (a cloud's metadata
    service), unspecified (``0.0.0.0`` is the host) or multicast."""
    v4 = as_ipv4(ip)
    for each in {ip, v4}:
        if each.is_loopback:
            return None if port in ports else "the host's loopback"
        if each.is_unspecified:
            return "the unspecified address, which is the host"
        if each.is_link_local:
            return "a link-local address"
        if each.is_multicast:
            return "a multicast address"
        if own(each):
            return "an address of the host"
    return None


def destination(host: str, port: int, ports: frozenset[int]) -> tuple[list[Place], str | None]:
    """The addresses ``host`` resolves to that the Run may reach, or why none."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        return [], f"{host} does not resolve: {e}"
    good: list[Place] = []
    why = None
    for family, _, _, _, sockaddr in found:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        said = refused(ip, port, ports)
        if said is None:
            good.append((family, sockaddr))
        else:
            why = f"{host}:{port} is {said} ({ip})"
    return good, (None if good else why or f"{host} has no address")


def _read_head(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > HEAD_MOST:
            return None
        data += chunk
    return data


def _answer(conn: socket.socket, status: str, why: str = "") -> None:
    body = (f"owl: {why}\n" if why else "").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    try:
        conn.sendall(head.encode() + body)
    except OSError:
        pass


def _target(line: str) -> tuple[str, str, int, str] | None:
    """(method, host, port, origin-form path) of a request line, or None."""
    parts = line.split(" ")
    if len(parts) != 3:
        return None
    method, uri, _ = parts
    if method == "CONNECT":
        host, _, port = uri.rpartition(":")
        return (method, host, int(port), "") if port.isdigit() and host else None
    if not uri.startswith("http://"):
        return None
    rest = uri[len("http://") :]
    authority, slash, path = rest.partition("/")
    host, colon, port = authority.rpartition(":")
    if not colon or not port.isdigit() or host.endswith(":"):  # no port, or a bare IPv6
        host, port = authority, "80"
    return method, host, int(port), slash + path if slash else "/"


def _forward(head: bytes, path: str) -> bytes:
    """A proxied request as its origin server takes it: the origin-form path,
    no proxy headers, one request per connection."""
    lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    method, _, version = lines[0].split(b" ")
    kept = [
        ln
        for ln in lines[1:]
        if not ln.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))
    ]
    first = b" ".join((method, path.encode(), version))
    rest = head.split(b"\r\n\r\n", 1)[1]
    return b"\r\n".join([first, *kept, b"Connection: close", b"", b""]) + rest


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _connect(places: list[Place]) -> tuple[socket.socket | None, str]:
    """A connection to the first of ``places`` that answers (the addresses
    judged, not the name again), or None and why."""
    why = "no address"
    for family, sockaddr in places:
        upstream = socket.socket(family, socket.SOCK_STREAM)
        try:
            upstream.settimeout(CONNECT_TIMEOUT)
            upstream.connect(sockaddr)
            upstream.settimeout(None)
            return upstream, ""
        except OSError as e:
            why = str(e)
            upstream.close()
    return None, why


def serve_one(conn: socket.socket, ports: frozenset[int]) -> None:
    """One client connection: its one request (or tunnel) carried, or refused."""
    with conn:
        try:
            head = _read_head(conn)
        except OSError:
            return
        said = _target(head.split(b"\r\n", 1)[0].decode("latin-1")) if head else None
        if head is None or said is None:
            _answer(conn, "400 Bad Request", "not a proxy request")
            return
        method, host, port, path = said
        good, why = destination(host, port, ports)
        if why is not None:
            _answer(conn, "403 Forbidden", f"refused: {why}")
            return
        upstream, why = _connect(good)
        if upstream is None:
            _answer(conn, "502 Bad Gateway", f"{host}:{port}: {why}")
            return
        with upstream:
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(_forward(head, path))
            back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
            back.start()
            _pipe(conn, upstream)
            back.join()


def listen() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def accept_forever(sock: socket.socket, ports: frozenset[int]) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=serve_one, args=(conn, ports), daemon=True).start()


def proxied(argv: list[str], port: int, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command with the profile's placeholder made ``port`` (in the profile
    only: the element after the first ``-p``) and the proxy in its environment."""
    out = list(argv)
    if "-p" in out[:-1]:
        at = out.index("-p") + 1
        out[at] = out[at].replace(PLACEHOLDER, str(port))
    url = f"http://127.0.0.1:{port}"
    env = dict(env)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        env[name] = url
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = "localhost,127.0.0.1,::1"
    env["NODE_USE_ENV_PROXY"] = "1"  # Node's own fetch reads the variables only when asked
    return out, env


def _numbers(arg: str) -> frozenset[int]:
    return frozenset() if arg == "-" else frozenset(int(p) for p in arg.split(","))


def _parsed(argv: list[str]) -> tuple[str, str | None, list[str]]:
    """(PORTS, the temporary folder or None, the command) of the arguments."""
    ports, rest = argv[0], argv[1:]
    tmp = None
    if rest[:1] == ["--tmp"]:
        tmp, rest = rest[1], rest[2:]
    assert rest[:1] == ["--"] and rest[1:], argv
    return ports, tmp, rest[1:]


def main(argv: list[str]) -> int:
    said, tmp, command = _parsed(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = None if said == "none" else listen()
    env = dict(os.environ)
    if sock is not None:
        command, env = proxied(command, sock.getsockname()[1], env)
    try:
        return _run(command, env, sock, _numbers(said) if sock is not None else frozenset())
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # links in it are removed, not followed


def _run(
    command: list[str], env: dict[str, str], sock: socket.socket | None, ports: frozenset[int]
) -> int:
    """The command started (its proxy served on ``sock``, if any) and waited for."""
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return
        try:
            if sock is not None:
                sock.close()
            for sig in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            os.execvpe(command[0], command, env)
        except BaseException as e:
            os.write(2, f"owl: cannot start {command[0]}: {e}\n".encode())
        os._exit(127)
    if sock is not None:
        threading.Thread(target=accept_forever, args=(sock, ports), daemon=True).start()
    while True:
        try:
            _, raw = os.waitpid(pid, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
    if sock is not None:
        sock.close()
    code = os.waitstatus_to_exitcode(raw)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
