"""Give a bwrap sandbox a network of its own (run as a script, not imported).

    python -I -S netns.py HELPER PORTS [--report FILE] [--allow HOSTS] [--setup FILE] [--filter HEX] -- BWRAP [ARGS...] -- COMMAND...

HELPER is the path of ``pasta`` or, where pasta is missing, ``slirp4netns``
(``-``: no network to make, bwrap alone).
FILE, when given, is written once the network is set up: empty when the Run
has its own network, else why it has none ("pasta: Failed to open() /dev/net/tun:
…"), so the Run's record says what its network is, not what was asked.
HOSTS (``pypi.org,.example.com``): the Run reaches only these, through the
allow-list's proxy (``egress.py``), started here, outside the sandbox; every
other destination is closed in its namespace.

In every case the host's own addresses and link-local are closed in the
Run's namespace before the agent starts (``netroutes.py``, which also names
the namespace to pasta: see `netpasta.start`), and where the host's resolver is on
its loopback the Run's resolv.conf names pasta's DNS forward (``netdns.py``).

Why: a sandbox that shares the host's network namespace shares its abstract
Unix sockets too, and the X server listens on one (``@/tmp/.X11-unix/X0``): any
process there can type into the person's terminal. In a namespace of its own it
cannot. ``pasta`` (Debian's ``passt``) gives that namespace user-mode networking,
so the agent still reaches the internet and its model's API.

bwrap is started with ``--unshare-net --info-fd --block-fd``: it makes the
namespace, says its child's pid, and waits. pasta is then attached to that
child's namespace (it forks into the background once the network is up: its
exit is the signal to go on), and bwrap is let go. pasta does not leave by
itself when the sandbox has ended (measured: it stays with the namespace it
holds), so it is ended here once bwrap has; until then it is part of the Run's
tree, frozen with it, and killed with it if it comes to that.

Where the host has an IPv4 default route, pasta gives the Run IPv4 only
(``-4``): its start takes about half the time without IPv6's set-up.

PORTS (``-`` for none, else ``4000,8080``) are the host's 127.0.0.1 ports that
stay reachable on the sandbox's own 127.0.0.1 (a local model API the agent is
pointed at); no other port of the host is (``--no-map-gw``, ``-T`` naming only
these). If pasta fails, the sandbox keeps its empty namespace (no network),
which is said on stderr: never the host's.

slirp4netns (the fallback) is started in the foreground with ``--ready-fd``
(its word that the network is up is the signal to go on) and ``--exit-fd``
(closed here once bwrap has ended, it leaves); it cannot forward the host's
127.0.0.1 ports into the namespace, so it is used only when PORTS is ``-``,
and the host's loopback stays out of reach (``--disable-host-loopback``).

SIGTERM is ignored here, and so by bwrap's monitor and pasta, which inherit
that: it is meant for the agent (bwrap puts it back at its default for the
agent, see ``bwrap.py``), whose 5 s to end would otherwise be spent without its
network and with this helper gone, its status lost. SIGKILL still ends them.

Standard library only, started with ``-I -S``, and without ``subprocess`` or
``re``, whose imports alone double its start (measured 17 -> 35 ms on a busy
machine): processes are started by fork and exec, their signal mask and
dispositions set in between, and waited for through a pidfd. The exit status
is bwrap's (that is, the agent's).

bwrap's options and the seccomp filter (HEX, ``owl.sandbox.syscalls``) are
handed to it by memfds, and whether it failed at its own start is read from
its status fd (``handoff.py``). FILE after ``--setup`` is written when it did,
before the command ran: the Run's failure is then the sandbox's, not the
agent's, however its output reads (an agent can print "bwrap: ..." itself).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.sandbox import handoff, netdns, netpasta, netproc, netslirp
else:  # run as a script (-I -S): its siblings, after the standard library
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import handoff
    import netdns
    import netpasta
    import netproc
    import netslirp

READY_TIMEOUT = netproc.READY_TIMEOUT
ROUTES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netroutes.py")
EGRESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "egress.py")
# With an allow-list: every destination but the namespace's own (its loopback,
# where pasta forwards the proxy's port) closed, more specific than the
# default route pasta lays.
CUT = ("0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1")
PROXY_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


def _child_pid(fd: int) -> int | None:
    # bwrap writes the pid at once but closes the JSON only later: read the number.
    data = b""
    while True:
        at = data.find(b'"child-pid"')
        if at >= 0:
            rest = data[at + len(b'"child-pid"') :].lstrip(b" \t\n:")
            digits = rest[: len(rest) - len(rest.lstrip(b"0123456789"))]
            if digits and len(rest) > len(digits):  # the number has ended
                return int(digits)
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk


def _loopback_set(pid: int) -> None:
    """Wait (a few ms) until bwrap has brought up the namespace's loopback (see
    `_attach`). The namespace's routes are readable from outside, by anyone,
    in /proc."""
    deadline = time.monotonic() + READY_TIMEOUT
    pause = 0.0005
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/net/fib_trie", "rb") as f:
                if b"127.0.0.1" in f.read():
                    return
        except OSError:
            return  # bwrap has gone: nothing to wait for
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _attach(
    helper: str, ports: str, pid: int, folder: str, dns: list[str], holder: _Holder
) -> tuple[str | None, netpasta.Pasta | netslirp.Slirp | None]:
    """The namespace's network, by whichever helper was named, with the host's
    own addresses and link-local closed in it first (``netroutes.py``): (why
    not, its end). Without those routes the Run has no network, never one
    that reaches the host's other addresses.

    bwrap's child sets up the namespace's loopback as soon as bwrap has said
    its pid (long before it reads the block fd), and either helper configuring
    the namespace at that moment makes that set-up fail and the Run with it
    (seen with both: "loopback: Failed RTM_NEWADDR"): they start once it is done."""
    _loopback_set(pid)
    try:
        why = holder.go(pid)
        if why is not None:
            return f"the host's addresses could not be closed to it ({why})", None
        if os.path.basename(helper).startswith("slirp4netns"):
            return netslirp.start(helper, pid)
        why, fd = netpasta.start(helper, ports, holder.pid, folder, dns, holder.userns)
        return why, None if fd is None else netpasta.Pasta(fd)
    finally:
        holder.end()


class _Holder:
    """``netroutes.py`` in the Run's namespaces: it closes the host's addresses
    there, then stays until ``end()``, so that pasta can be named them by its
    ``/proc/PID/ns`` (see `netpasta.start`). Started before bwrap, so that its own
    start (an interpreter's) is made while bwrap sets the sandbox up; told
    the namespaces once bwrap has said its child's pid (``go``)."""

    def __init__(self, cut: tuple[str, ...] = ()) -> None:
        self.pid = -1
        self.fds: list[int] = []
        self.ready_r, ready_w = os.pipe()
        hold_r, self.hold_w = os.pipe()
        self.err, err_w = os.pipe()
        argv = [sys.executable, "-I", "-S", ROUTES, str(ready_w), str(hold_r), *cut]
        try:
            self.pid = netproc.spawn(argv, (ready_w, hold_r), quiet=err_w)
        finally:
            for fd in (ready_w, hold_r, err_w):
                os.close(fd)

    def go(self, pid: int) -> str | None:
        """Join bwrap's child ``pid``'s network namespace (and the user
        namespace that owns it, see `netproc.namespaces`) and close the host's
        addresses there: None once done, else why not. The namespaces are
        opened here (bwrap's child is not dumpable: only we may open them)
        and named to it by our fds, which stay open until ``end()``."""
        me = os.getpid()
        try:
            net, user = netproc.namespaces(pid)
            self.fds += [net] if user is None else [net, user]
            userns = "-" if user is None else f"/proc/{me}/fd/{user}"
            os.write(self.hold_w, f"{userns} /proc/{me}/fd/{net}\n".encode())
        except OSError as e:
            return str(e)
        up = select.select([self.ready_r], [], [], READY_TIMEOUT)[0]
        if up and os.read(self.ready_r, 16).startswith(b"ready"):
            return None
        lines = netproc.read_now(self.err).strip().splitlines()
        self.err = -1
        return lines[-1] if lines else "it did not start"

    @property
    def userns(self) -> bool:
        """Whether it joined a user namespace besides the network's."""
        return len(self.fds) > 1

    def end(self) -> None:
        for fd in (self.ready_r, self.hold_w, self.err, *self.fds):
            if fd >= 0:
                os.close(fd)
        self.ready_r = self.hold_w = self.err = -1
        self.fds = []
        if self.pid > 0 and netproc.wait(self.pid, READY_TIMEOUT) is None:
            os.kill(self.pid, signal.SIGKILL)
            netproc.wait(self.pid)
        self.pid = -1


def _report(path: str | None, why: str | None) -> None:
    """Say how the network came out (see the module's docstring)."""
    if path is None:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.write(fd, (why or "").encode()[:1024])
    finally:
        os.close(fd)


def _own_folder() -> str:
    """A folder of this helper's own (0700) for pasta's pid file and the
    Run's resolv.conf, removed once the Run has ended (`_clean`)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(base, f"owl-net-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _clean(folder: str) -> None:
    for name in ("pasta.pid", netdns.RESOLV):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _with_options(bwrap: list[str], more: list[str]) -> list[str]:
    """bwrap's argv with ``more`` as its last options (after every mount)."""
    at = bwrap.index("--") if "--" in bwrap else len(bwrap)
    return [*bwrap[:at], *more, *bwrap[at:]]


class _Args:
    """netns.py's own options, then bwrap's argv."""

    def __init__(self, argv: list[str]) -> None:
        self.helper, self.ports, rest = argv[0], argv[1], argv[2:]
        self.report: str | None = None  # how the network came out
        self.setup: str | None = None  # written when bwrap fails at its own start
        self.seccomp: bytes | None = None
        self.allow: list[str] | None = None  # the allow-list's hosts
        while rest and rest[0] != "--":
            if rest[0] == "--report":
                self.report = rest[1]
            elif rest[0] == "--setup":
                self.setup = rest[1]
            elif rest[0] == "--filter":
                self.seccomp = bytes.fromhex(rest[1])
            elif rest[0] == "--allow":
                self.allow = [h for h in rest[1].split(",") if h]
            else:
                raise SystemExit(f"netns.py: unknown option {rest[0]}")
            rest = rest[2:]
        assert rest and rest[0] == "--" and rest[1:]
        self.bwrap = handoff.present(rest[1:])


def _write_setup(path: str | None, code: int) -> None:
    """Say that bwrap failed at its own start (the file is Owl's, out of the Run's sight)."""
    if path is not None:
        _report(path, f"bwrap could not set up the sandbox (exit {code})")


def main(argv: list[str]) -> int:
    args = _Args(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # before bwrap and pasta: they inherit it
    if args.helper == "-":  # no network to make: bwrap alone, its argv checked just now
        return _run(args, args.bwrap, None, args.ports, ())
    folder = _own_folder()
    proxy = None
    try:
        bwrap, ports = args.bwrap, args.ports
        cut: tuple[str, ...] = ()
        if args.allow is not None:
            proxy, port = _proxy(args.allow)
            if port is None:  # the Run then has no network, and says so
                _report(args.report, "the allow-list's proxy did not start")
                args.helper = "-"
                return _run(args, [bwrap[0], "--unshare-net", *bwrap[1:]], None, "-", ())
            ports = ",".join([*(p for p in ports.split(",") if p != "-"), str(port)])
            url = f"http://127.0.0.1:{port}"
            env = [a for name in PROXY_ENV for a in ("--setenv", name, url)]
            env += ["--setenv", "NO_PROXY", "localhost,127.0.0.1,::1"]
            env += ["--setenv", "no_proxy", "localhost,127.0.0.1,::1"]
            bwrap, cut = _with_options(bwrap, env), CUT
        return _run(args, bwrap, folder, ports, cut)
    finally:
        if proxy is not None:
            os.kill(proxy, signal.SIGKILL)
            netproc.wait(proxy)
        _clean(folder)


def _proxy(hosts: list[str]) -> tuple[int, int | None]:
    """Start the allow-list's proxy (``egress.py``): (its pid, the port of
    127.0.0.1 it listens on, or None when it did not start)."""
    ready_r, ready_w = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        pid = netproc.spawn(
            [sys.executable, "-I", "-S", EGRESS, str(ready_w), *hosts], (ready_w,), quiet=null
        )
    finally:
        os.close(ready_w)
        os.close(null)
    said = b""
    if select.select([ready_r], [], [], READY_TIMEOUT)[0]:
        said = os.read(ready_r, 16).strip()
    os.close(ready_r)
    return pid, int(said) if said.isdigit() else None


def _run(
    args: _Args, bwrap: list[str], folder: str | None, ports: str, cut: tuple[str, ...]
) -> int:
    """bwrap started (blocked, where a network is to be made: its namespace is
    given its network, ``cut`` closing more prefixes in it, then let go), its
    options and filter handed over by fds; bwrap's exit status once it has
    ended, and whether it failed at its own start said in ``--setup``'s file."""
    net = args.helper != "-" and folder is not None
    dns: list[str] = []
    if net and folder is not None and not cut and not _is_slirp(args.helper):
        dns, options = netdns.resolver(folder)
        bwrap = _with_options(bwrap, options)
    status_r, status_w = os.pipe()
    extra = ["--json-status-fd", str(status_w)]
    info_r = info_w = block_r = block_w = -1
    if net:
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        extra += ["--unshare-net", "--info-fd", str(info_w), "--block-fd", str(block_r)]
    command, fds = handoff.hidden(bwrap, extra, args.seccomp)
    passed = (status_w, info_w, block_r, *fds) if net else (status_w, *fds)
    holder = _Holder(cut) if net else None
    proc = netproc.spawn(command, passed)
    for fd in passed:
        os.close(fd)
    network = None
    if holder is not None and folder is not None:
        network = _network(args, info_r, ports, folder, dns, holder)
        try:
            os.write(block_w, b"go")
        except OSError:
            pass
        os.close(block_w)
    code = netproc.wait(proc)
    set_up = handoff.set_up(status_r)  # bwrap has ended: the pipe holds all it wrote
    os.close(status_r)
    if info_r >= 0:
        os.close(info_r)
    if network is not None:
        network.end()
    assert code is not None
    code = code if code >= 0 else 128 - code
    if not set_up and code != 0:
        _write_setup(args.setup, code)
    return code


def _is_slirp(helper: str) -> bool:
    return os.path.basename(helper).startswith("slirp4netns")


def _network(
    args: _Args, info_r: int, ports: str, folder: str, dns: list[str], holder: _Holder
) -> netpasta.Pasta | netslirp.Slirp | None:
    """The Run's network, once bwrap has said its child's pid (None: none made)."""
    pid = _child_pid(info_r)  # kept open: bwrap writes more (a closed pipe kills it)
    if pid is None:
        holder.end()
        return None
    why, network = _attach(args.helper, ports, pid, folder, dns, holder)
    if why is not None:
        os.write(2, f"owl: no user-mode networking ({why}); the Run has no network\n".encode())
        why = f"{os.path.basename(args.helper)}: {why}"
    _report(args.report, why)
    return network


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
