"""The egress allow-list's proxy: one per Run, outside its sandbox (run as a
script by ``netns.py``, not imported by the daemon).

    python -I -S egress.py READY HOST [HOST ...]

It listens on a free port of 127.0.0.1, says the port on the fd READY, and
serves HTTP proxy requests (``CONNECT host:port`` for HTTPS, absolute URLs for
plain HTTP) to the HOSTs only: a name as given (``pypi.org``), or with a
leading ``.`` or ``*.`` every name under it (``.githubusercontent.com``).
Anything else is answered ``403`` with one line saying which name is not in
``sandbox.allow_hosts``. A name that resolves to a loopback, link-local or
unspecified address is refused too: the allow-list names hosts of the
internet, never a way back to the machine's own services.

Why a proxy and not routes to resolved addresses: the registries' names
resolve to CDNs, whose addresses change and are shared with everything else
they serve. The Run reaches this port alone (pasta forwards it into the
Run's namespace; every other destination is closed by routes there, see
``netroutes.py``), with ``HTTPS_PROXY`` and ``HTTP_PROXY`` naming it; the
decision is made here, outside, where the agent cannot change it.

Standard library only, started with ``-I -S``; a thread per connection.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading

IDLE = 600.0  # a connection silent this long is closed
HEAD_MAX = 65536


def allowed(host: str, hosts: list[str]) -> bool:
    """Whether ``host`` is one of ``hosts`` (names, case aside; ``.x``/``*.x``:
    x's subdomains)."""
    host = host.lower().rstrip(".")
    for h in hosts:
        h = h.lower().rstrip(".")
        if h.startswith("*."):
            h = h[1:]
        if host == h or (h.startswith(".") and host.endswith(h)):
            return True
    return False


def target(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, the request to send on) from a request's head:
    CONNECT's authority, or an absolute ``http://`` URL made origin-form."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3:
        return None
    method, uri, version = parts
    if method == "CONNECT":
        host, port = _authority(uri, 443)
        return method, host, port, b""
    if not uri.lower().startswith("http://"):
        return None
    authority, _, path = uri[7:].partition("/")
    host, port = _authority(authority, 80)
    request = f"{method} /{path} {version}\r\n".encode("latin-1") + rest
    return method, host, port, request


def _authority(text: str, default: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    return host, int(port) if port.isdigit() else default


def _reachable(host: str, port: int) -> socket.socket:
    """A connection to ``host``, never to one of the machine's own addresses."""
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        ip = ipaddress.ip_address(str(addr[0]).split("%")[0])
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified:
            raise PermissionError(f"{host} resolves to {ip}, an address of this machine's")
        s = socket.socket(family, kind, proto)
        s.settimeout(30)
        try:
            s.connect(addr)
        except OSError:
            s.close()
            continue
        s.settimeout(None)
        return s
    raise OSError(f"cannot connect to {host}:{port}")


def _answer(conn: socket.socket, status: str, why: str) -> None:
    body = f"owl: {why}\n".encode()
    conn.sendall(
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(conn: socket.socket, hosts: list[str]) -> None:
    """One client: read its request's head, decide, then carry bytes both ways."""
    conn.settimeout(IDLE)
    with conn:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < HEAD_MAX:
            data = conn.recv(4096)
            if not data:
                return
            head += data
        end = head.find(b"\r\n\r\n") + 4
        asked = target(head[:end]) if end > 3 else None
        if asked is None:
            _answer(conn, "400 Bad Request", "only CONNECT and http:// requests are carried")
            return
        method, host, port, request = asked
        if not allowed(host, hosts):
            _answer(conn, "403 Forbidden", f"{host} is not in sandbox.allow_hosts")
            return
        try:
            upstream = _reachable(host, port)
        except OSError as e:
            _answer(
                conn,
                "403 Forbidden" if isinstance(e, PermissionError) else "502 Bad Gateway",
                str(e),
            )
            return
        with upstream:
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(request)
            if head[end:]:
                upstream.sendall(head[end:])
            back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
            back.start()
            _pipe(conn, upstream)
            back.join()


def main(argv: list[str]) -> int:
    ready, hosts = int(argv[0]), argv[1:]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    os.write(ready, f"{listener.getsockname()[1]}\n".encode())
    os.close(ready)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, hosts), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
