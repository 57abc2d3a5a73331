"""The network of a Seatbelt Run (``owl/sandbox/seatnet.py``), run for real.

seatnet.py is the one way out of a macOS Run to the network: the profile lets
the Run reach nothing directly but 127.0.0.1 on the Policy's ports and on this
proxy's (tests/test_sandbox_seatbelt.py reads that from the rule text). Here
it runs as Owl starts it (``python -I -S seatnet.py PORTS -- COMMAND``), with a
client in place of sandbox-exec that asks it for each spelling of the host an
agent could write, against real listeners on this machine's loopback, its
wildcard and its own non-loopback addresses. Nothing leaves the machine."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from owl.sandbox import seatbelt, seatnet

SEATNET = seatbelt.SEATNET

# Asks the proxy named in HTTPS_PROXY for each "host port" of its arguments and
# prints {target: answer}: the status line, and after a CONNECT that succeeded
# what the far end echoed back.
CLIENT = textwrap.dedent(
    """
    import json, os, socket, sys
    proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
    out = {}
    for target in sys.argv[1:]:
        host, port = target.rsplit(" ", 1)
        s = socket.create_connection((proxy[0][len("http://"):], int(proxy[1])), timeout=10)
        name = f"[{host}]" if ":" in host else host
        s.sendall(f"CONNECT {name}:{port} HTTP/1.1\\r\\nHost: {name}:{port}\\r\\n\\r\\n".encode())
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            chunk = s.recv(1)
            if not chunk:
                break
            head += chunk
        answer = head.split(b"\\r\\n", 1)[0].decode()
        if " 200 " in answer:
            s.sendall(b"ping\\n")
            answer += " / " + s.recv(100).decode().strip()
        else:
            answer += " / " + s.recv(1000).decode().strip()
        out[target] = answer
        s.close()
    print(json.dumps(out))
    """
)


class Echo:
    """A host service: answers each connection with what it was sent, prefixed."""

    def __init__(self, family: int, host: str, port: int = 0) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.reached = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.reached += 1
            with conn:
                data = conn.recv(100)
                conn.sendall(b"host service: " + data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def wildcard() -> Iterator[Echo]:
    """A service on every address of the host (IPv4 and IPv6, as Ollama on
    0.0.0.0 or an IDE's server on [::] listens)."""
    echo = Echo(socket.AF_INET6, "::")
    yield echo
    echo.close()


def own_addresses() -> list[str]:
    """This machine's own non-loopback, non-link-local addresses (its "LAN" ones)."""
    out = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                ip = ipaddress.ip_address(a.address.split("%")[0])
                if not (ip.is_loopback or ip.is_link_local):
                    out.append(str(ip))
    return out


def ask(ports: str, *targets: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", SEATNET, ports, "--", sys.executable, "-c", CLIENT, *targets],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_hosts_loopback_is_refused_in_every_spelling(wildcard: Echo) -> None:
    """Each spelling reaches the listener when asked directly (checked here
    first, so a refusal means the proxy's, not an unreachable address); through
    the proxy each is refused, saying why, and the service is never reached."""
    p = wildcard.port
    spellings = [
        "127.0.0.1",
        "localhost",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:7f00:1",
        "0.0.0.0",
        "127.0.0.2",  # the rest of 127.0.0.0/8
        "127.1",  # inet_aton's short form
        "2130706433",  # and its number
        "0x7f000001",
        "::1",
        "::",
        *own_addresses(),  # the host's own LAN addresses, reaching its wildcard listener
    ]
    reachable = []
    for host in spellings:
        try:
            with socket.create_connection((host, p), timeout=2):
                reachable.append(host)
        except OSError:
            pass
    assert {"127.0.0.1", "::1", "0.0.0.0", "::ffff:127.0.0.1"} <= set(reachable), reachable
    deadline = time.monotonic() + 30  # each direct connection counted before the proxy's turn
    while wildcard.reached < len(reachable):
        assert time.monotonic() < deadline, (wildcard.reached, reachable)
        time.sleep(0.01)
    before = wildcard.reached
    said = ask("-", *(f"{h} {p}" for h in reachable))
    for host in reachable:
        answer = said[f"{host} {p}"]
        assert answer.startswith("HTTP/1.1 403 ") and "owl: refused" in answer, (host, answer)
    assert wildcard.reached == before, "the host's service was reached through the proxy"
    assert "loopback" in said[f"::ffff:127.0.0.1 {p}"]
    assert "unspecified" in said[f"0.0.0.0 {p}"]


def test_the_ports_the_policy_names_are_carried(wildcard: Echo) -> None:
    """The agent's provider on the host's 127.0.0.1 (a named port) is reached
    through the proxy as directly; another port of the same loopback is not."""
    other = Echo(socket.AF_INET, "127.0.0.1")
    try:
        said = ask(
            str(wildcard.port),
            f"127.0.0.1 {wildcard.port}",
            f"::ffff:127.0.0.1 {wildcard.port}",
            f"127.0.0.1 {other.port}",
        )
    finally:
        other.close()
    assert said[f"127.0.0.1 {wildcard.port}"].endswith(
        "200 Connection established / host service: ping"
    )
    assert " 200 " in said[f"::ffff:127.0.0.1 {wildcard.port}"]
    assert " 403 " in said[f"127.0.0.1 {other.port}"] and other.reached == 0


def test_a_plain_http_request_is_forwarded_in_origin_form(wildcard: Echo) -> None:
    """``http://`` through the proxy: the request line the server gets names
    the path only, and no Proxy- header is passed on."""
    got: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(1000)
            got.append(data)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")

    threading.Thread(target=serve, daemon=True).start()
    client = (
        "import os, urllib.request\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{port}/a/b?c=1', timeout=10).read().decode())"
    )
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    # urllib honours NO_PROXY for 127.0.0.1: ask it to use the proxy anyway
    code = f"import os; os.environ.pop('no_proxy'); os.environ.pop('NO_PROXY')\n{client}"
    done = subprocess.run(
        [sys.executable, "-I", "-S", SEATNET, str(port), "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    srv.close()
    assert done.returncode == 0 and done.stdout.strip() == "hi", done.stderr
    line = got[0].split(b"\r\n", 1)[0]
    assert line == b"GET /a/b?c=1 HTTP/1.1"
    assert b"proxy-" not in got[0].lower()


def test_the_placeholder_the_environment_and_the_exit_status(tmp_path: Path) -> None:
    """The profile's placeholder (after ``-p``) becomes the proxy's port, and
    nowhere else (an agent's prompt may hold the word); the proxy is in the
    command's environment, loopback left direct; the exit status is the command's."""
    show = (
        "import json, os, sys; print(json.dumps([sys.argv, {k: os.environ.get(k) for k in "
        "('HTTPS_PROXY', 'http_proxy', 'NO_PROXY', 'NODE_USE_ENV_PROXY')}])); sys.exit(7)"
    )
    profile = f'(allow network-outbound (remote ip "localhost:{seatbelt.EGRESS_PORT}"))'
    done = subprocess.run(
        [sys.executable, "-I", "-S", SEATNET, "-", "--", sys.executable, "-c", show]
        + ["-p", profile, "prompt " + seatbelt.EGRESS_PORT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 7, done.stderr
    argv, env = json.loads(done.stdout)
    port = int(env["HTTPS_PROXY"].rsplit(":", 1)[1])
    assert env["HTTPS_PROXY"] == env["http_proxy"] == f"http://127.0.0.1:{port}"
    assert argv[-2] == f'(allow network-outbound (remote ip "localhost:{port}"))'
    assert argv[-1] == "prompt " + seatbelt.EGRESS_PORT
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1" and env["NODE_USE_ENV_PROXY"] == "1"


def test_sigterm_is_the_commands(tmp_path: Path) -> None:
    """Owl's SIGTERM to every process of the Run: seatnet.py stays (the agent
    keeps its network for its 5 s to end), the command gets it at its default."""
    ready = tmp_path / "ready"
    code = f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('x'); time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", SEATNET, "-", "--", sys.executable, "-c", code]
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        child = psutil.Process(proc.pid).children()[0]
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(child.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("169.254.169.254", "link-local"),  # a cloud's metadata service
        ("::ffff:169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64
        ("2002:7f00:1::", "loopback"),  # 6to4
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "unspecified"),
    ],
)
def test_what_the_proxy_refuses_by_address(addr: str, why: str) -> None:
    said = seatnet.refused(
        ipaddress.ip_address(addr), 443, frozenset({443}) if why != "loopback" else frozenset()
    )
    assert said is not None and why in said, said


def test_an_ordinary_address_is_let_through() -> None:
    assert seatnet.refused(ipaddress.ip_address("93.184.216.34"), 443, frozenset()) is None
    assert seatnet.refused(ipaddress.ip_address("2606:2800:220:1::1"), 443, frozenset()) is None


def test_the_runs_temporary_folder_is_removed_when_it_ends_no_link_followed(
    tmp_path: Path,
) -> None:
    """``--tmp DIR``: the Run's own temporary folder (mactemp) goes when the
    command has ended; what a link the Run left there leads to stays. With
    ``none`` for PORTS (a Run with no network) there is no proxy at all."""
    mine = tmp_path / "mine.txt"
    mine.write_text("the person's\n")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "keep").write_text("x")
    tmp = tmp_path / "owl-0" / "job-1.claude" / "0a1b2c3d"
    tmp.mkdir(parents=True)
    plant = (
        "import json, os, pathlib, sys; t = pathlib.Path(os.environ['TMPDIR']);"
        f" (t / 'link').symlink_to({str(mine)!r}); (t / 'dir').symlink_to({str(tmp_path / 'theirs')!r});"
        " (t / 'sub').mkdir(); (t / 'sub' / 'f').write_text('y');"
        " print(json.dumps(os.environ.get('HTTPS_PROXY'))); sys.exit(5)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", SEATNET, "none", "--tmp", str(tmp), "--"]
        + [sys.executable, "-c", plant],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert done.returncode == 5, done.stderr
    assert json.loads(done.stdout) is None  # no proxy
    assert not tmp.exists() and tmp.parent.is_dir()  # the Job's folder stays
    assert mine.read_text() == "the person's\n" and (tmp_path / "theirs" / "keep").exists()
