"""The network: a Run reaches the internet (and the host's 127.0.0.1 ports its
agent's URLs name), never the host's other addresses nor link-local ones.

pasta carries whatever the Run sends out through the host's own sockets, so
a listener on a link-local address (a cloud machine's metadata service,
169.254.169.254, hands out credentials there) or on another of the host's
addresses (a service bound to 0.0.0.0, reached through a bridge's or a
VPN's address) answered from inside. The test's own network namespace
stands in for the machine (``support.testnet``): its addresses, listeners on
each, and a resolver on 127.0.0.53 (systemd-resolved's stub), which a Run
must still reach by name. As root and as an ordinary user, whose pasta runs
as on a desktop (a tun device open to all)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


from escapes.harness import TRY, WORK, base, done, landed, person, project, refused
from owlproc import OWL, OwlDaemon, wait_for
from support import testnet as T
from support.need import programs
from support.users import UserOwl, chown_tree, second_user, shared_install

__all__ = ["base"]

PROBE = r"""
reach() {
  python3 -c 'import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(family)
s.settimeout(5)
s.connect(socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4])  # with its zone
assert s.recv(5) == b"hello"' "$1" "$PORT"
}
# The Run's own link-local address out of its duplicate check (a second or
# so after its interface came up), so that the way below is tried in earnest.
python3 -c 'import time
end = time.monotonic() + 10
while time.monotonic() < end:
    rows = [r.split() for r in open("/proc/net/if_inet6")]
    if not any(r[0].startswith("fe80") and int(r[4], 16) & 0x40 for r in rows):
        break
    time.sleep(0.05)'
ZONE=$(python3 -c 'import socket; print([n for _, n in socket.if_nameindex() if n != "lo"][0])')
try "a link-local address of the host's, IPv6, named with its zone" 'reach $LINK_LOCAL6%$ZONE'
try "a link-local address on the host's link (a metadata service)" 'reach $METADATA'
try "a link-local address of the host's" 'reach $LINK_LOCAL'
try "another address of the host's (a bridge's)" 'reach $OTHER'
try "the host's LAN address" 'reach $LAN'
try "the host's LAN address, IPv6" 'reach $LAN6'
try "another address of the host's, IPv6" 'reach $OTHER6'
if getent hosts "$NAME" | grep -q "$ADDRESS"; then echo "resolved: $NAME"; else echo "unresolved: $NAME"; fi
"""
WAYS = (
    "a link-local address of the host's, IPv6, named with its zone",
    "a link-local address on the host's link (a metadata service)",
    "a link-local address of the host's",
    "another address of the host's (a bridge's)",
    "the host's LAN address",
    "the host's LAN address, IPv6",
    "another address of the host's, IPv6",
)
KNOWN = {
    "PORT": T.PORT,
    "METADATA": T.METADATA,
    "LINK_LOCAL": T.LINK_LOCAL,
    "OTHER": T.OTHER,
    "LAN": T.LAN,
    "LAN6": T.LAN6,
    "OTHER6": T.OTHER6,
    "NAME": T.NAME,
    "ADDRESS": T.ADDRESS,
}


def known(net: T.TestNet) -> dict[str, object]:
    """What the attack's script is told of the stand-in host."""
    return {**KNOWN, "LINK_LOCAL6": T.link_local6(net), "INTERNET6": T.INTERNET6}


def script(folder: Path, net: T.TestNet, more: str = "") -> list[str]:
    path = folder / "attack.sh"
    head = "".join(f"{k}={v}\n" for k, v in known(net).items())
    path.write_text(TRY + head + PROBE + more + WORK)
    path.chmod(0o755)
    return ["bash", str(path)]


def config(command: list[str]) -> dict:
    return {
        "sandbox": {"mode": "required"},
        "agents": {"shell": {"command": command}},
        "agent": {"default": "shell"},
        "power": {"keep_awake": False},
    }


class NetOwl(OwlDaemon):
    """The daemon started inside the test's network namespace, as root."""

    def __init__(self, net: T.TestNet, *a, **kw) -> None:
        self.net = net
        super().__init__(*a, **kw)

    def _spawn(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [*self.net.prefix(), *OWL, *self.argv],
                env=self.env,
                stdout=logf,
                stderr=logf,
                stdin=subprocess.DEVNULL,
            )


class NetUserOwl(UserOwl):
    """The daemon started inside the test's network namespace, as ``user``."""

    def __init__(self, net: T.TestNet, tun: bool, *a, **kw) -> None:
        self.net, self.tun = net, tun
        super().__init__(*a, **kw)

    def start(self, wait: bool = True) -> "NetUserOwl":
        logf = open(self.log, "ab")
        os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(
            [
                *self.net.prefix(self.user.pw_name, self.tun),
                sys._base_executable,
                *OWL[1:],
                "daemon",
            ],
            env=self.env,
            stdout=logf,
            stderr=logf,
            stdin=subprocess.DEVNULL,
            cwd=str(self.home),
        )
        logf.close()
        wait_for(
            lambda: self.owl("status", "--json").returncode == 0 or self._died(),
            timeout=20,
            what="the daemon to answer",
        )
        self._check_alive()
        return self


QUIET = {"AGENT_PIDS": ""}  # a contained Run cannot note its pids in the home


def said(log: str, line: str) -> bool:
    """Whether the Run's log has ``line`` as a line of its own ("resolved: …"
    is also the tail of "unresolved: …")."""
    return line in log.splitlines()


def verdict(log: str, label: str) -> None:
    refused(log, *WAYS)
    assert said(log, f"resolved: {T.NAME}"), log  # through pasta, to the host's 127.0.0.53
    assert ", own network" in label, label


# Another pasta to run the tests with (Debian 13's: `dpkg-deb -x` of
# trixie's passt, run through trixie's ld.so where the host's glibc is older).
PASTAS = ["pasta", *filter(None, [os.environ.get("OWL_TEST_PASTA")])]
INTERNET6 = 'if reach $INTERNET6; then echo "reached: the internet, IPv6"; fi\n'


def on_path(pasta: str, folder: Path) -> dict[str, str]:
    """The daemon's PATH, finding ``pasta`` under that name first."""
    if pasta == "pasta":
        return {}
    bin_dir = folder / "pasta-bin"
    bin_dir.mkdir(mode=0o755)
    (bin_dir / "pasta").symlink_to(pasta)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def forwards_to_a_loopback_resolver(pasta: str) -> bool:
    """Whether this pasta can forward IPv6 DNS to the host's resolver on its
    IPv4 loopback (``--dns-host``; Debian 12's has none)."""
    asked = [pasta, "--dns-host", "::1", "--version"]  # "unrecognized option" where none
    return subprocess.run(asked, capture_output=True, check=False).returncode == 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("pasta", PASTAS)
def test_a_roots_run_reaches_no_address_of_the_host_and_resolves_names(
    base: Path, pasta: str
) -> None:
    programs("bwrap", pasta, "ip")
    home = person(base)
    proj = project(base)
    with T.test_net() as net:
        env = {"HOME": str(home), "AGENT_PIDS": "", **on_path(pasta, base)}
        d = NetOwl(net, base / "owl", config(script(base, net)), env=env)
        with d:
            job = d.add("do the work", proj)
            d.ok("start")
            j, log = done(d, job)
            verdict(log, j["runs"][-1]["contained"])
            landed(proj, j["branch"])


@contextlib.contextmanager
def ordinary_user() -> Iterator[tuple[pwd.struct_passwd, Path, Path, Path]]:
    """A second user, a folder it can read (its projects, Owl's install), a
    project of its own: (the user, the folder, the install, the project)."""
    with second_user("net") as user:
        root = Path(tempfile.mkdtemp(prefix="owl-net-", dir="/var/tmp"))
        root.chmod(0o755)
        try:
            shared = shared_install(root / "lib")
            proj = project(root)
            chown_tree(proj, user)
            yield user, root, shared, proj
        finally:
            shutil.rmtree(root, ignore_errors=True)


def run_once(d: OwlDaemon, proj: Path) -> tuple[dict, str]:
    """One Job's Run, to review: its view and its log."""
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j = d.wait_job(job, "review", timeout=300)
        return j, Path(j["runs"][-1]["log"]).read_text(errors="replace")


@pytest.mark.timeout(900)
def test_an_ordinary_users_run_reaches_no_address_of_the_host_and_resolves_names() -> None:
    programs("bwrap", "pasta", "ip", "setpriv")
    with ordinary_user() as (user, root, shared, proj), T.test_net() as net:
        cfg = config(script(root, net))
        d = NetUserOwl(net, True, root / "owl", user, shared, config=cfg, env=QUIET)
        j, log = run_once(d, proj)
        verdict(log, j["runs"][-1]["contained"])
        # the machine's own /dev/net/tun, root's alone here: a real pasta fails
        d = NetUserOwl(net, False, root / "owl2", user, shared, config=cfg, env=QUIET)
        j, _ = run_once(d, proj)
        label = j["runs"][-1]["contained"]
        assert ", no network: pasta: " in label and "own network" not in label, label


@pytest.mark.timeout(900)
@pytest.mark.parametrize("pasta", PASTAS)
@pytest.mark.parametrize("who", ["root", "an ordinary user"])
def test_on_a_machine_with_ipv6_alone_no_address_of_the_host_is_reached(
    base: Path, who: str, pasta: str
) -> None:
    """Where the machine's only default route is IPv6's, pasta gives the Run
    IPv6 too: another of the host's IPv6 addresses answered from inside, and
    so did the host's link-local address named with the Run's interface as
    its zone (the kernel's fe80::/64 route on it outranked a prohibit route).
    The Run still reaches the internet by IPv6 through a link-local gateway,
    and resolves names through the resolver on the host's loopback."""
    programs("bwrap", pasta, "ip", "setpriv")
    home = person(base)
    with T.test_net(ipv4=False) as net:
        if who == "root":
            cfg = config(script(base, net, INTERNET6))
            env = {"HOME": str(home), **QUIET, **on_path(pasta, base)}
            d: OwlDaemon = NetOwl(net, base / "owl", cfg, env=env)
            j, log = run_once(d, project(base))
        else:
            with ordinary_user() as (user, root, shared, proj):
                cfg = config(script(root, net, INTERNET6))
                env = {**QUIET, **on_path(pasta, root)}  # a folder the user can enter
                d = NetUserOwl(net, True, root / "owl", user, shared, config=cfg, env=env)
                j, log = run_once(d, proj)
    refused(log, *WAYS)
    assert ", own network" in j["runs"][-1]["contained"]
    assert said(log, "reached: the internet, IPv6"), log
    if forwards_to_a_loopback_resolver(pasta):
        assert said(log, f"resolved: {T.NAME}"), log
    else:  # the Run keeps the host's resolv.conf: a network without names
        assert said(log, f"unresolved: {T.NAME}"), log


ALLOW_PROBE = r"""
via() {
  python3 -c 'import os, socket, sys
proxy = os.environ["HTTPS_PROXY"].split("//")[1]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(f"CONNECT {sys.argv[1]}:{sys.argv[2]} HTTP/1.1\r\n\r\n".encode())
data = b""
while b"hello" not in data:
    more = s.recv(4096)
    if not more:
        break
    data += more
assert data.startswith(b"HTTP/1.1 200") and b"hello" in data, data' "$1" "$PORT"
}
if via "$ALLOWED"; then echo "reached: $ALLOWED"; else echo "not reached: $ALLOWED"; fi
try "a name not on the allow-list, through the proxy" 'via $DENIED'
try "the allowed host's address, directly" 'reach $ALLOWED_AT'
try "another address, directly" 'reach $DENIED_AT'
"""
ALLOW_WAYS = (
    "a name not on the allow-list, through the proxy",
    "the allowed host's address, directly",
    "another address, directly",
    "a link-local address of the host's, IPv6, named with its zone",
    "a link-local address on the host's link (a metadata service)",
    "a link-local address of the host's",
    "another address of the host's (a bridge's)",
)


def allow_config(folder: Path, net: T.TestNet) -> dict:
    """A config whose Runs try the ways out of an allow-list (and do their work)."""
    path = folder / "attack.sh"
    told = {
        **known(net),
        "ALLOWED": T.ALLOWED,
        "DENIED": T.DENIED,
        "ALLOWED_AT": T.ALLOWED_AT,
        "DENIED_AT": T.DENIED_AT,
    }
    head = "".join(f"{k}={v}\n" for k, v in told.items())
    path.write_text(TRY + head + PROBE.split("if getent")[0] + ALLOW_PROBE + WORK)
    path.chmod(0o755)
    cfg = config(["bash", str(path)])
    cfg["sandbox"] |= {"network": "allow", "allow_hosts": [T.ALLOWED]}
    return cfg


@pytest.mark.timeout(900)
@pytest.mark.parametrize("who", ["root", "an ordinary user"])
def test_an_allow_list_lets_through_its_hosts_only(base: Path, who: str) -> None:
    """``sandbox.network = "allow"``: the Run reaches the named host through
    the proxy Owl runs outside it, and nothing else, by name or by address."""
    programs("bwrap", "pasta", "ip", "setpriv")
    home = person(base)
    with T.test_net() as net:
        if who == "root":
            proj = project(base)
            cfg = allow_config(base, net)
            d: OwlDaemon = NetOwl(net, base / "owl", cfg, env={"HOME": str(home), **QUIET})
            j, log = run_once(d, proj)
        else:
            with ordinary_user() as (user, root, shared, proj):
                cfg = allow_config(root, net)
                d = NetUserOwl(net, True, root / "owl", user, shared, config=cfg, env=QUIET)
                j, log = run_once(d, proj)
    refused(log, *ALLOW_WAYS)
    assert said(log, f"reached: {T.ALLOWED}"), log
    label = j["runs"][-1]["contained"]
    assert label.endswith(", network: allow-list (1 host); unix sockets: none"), label
    if who == "root":
        landed(proj, j["branch"])
