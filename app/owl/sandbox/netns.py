"""Give a bwrap sandbox a network of its own (run as a script, not imported).

    python -I -S netns.py HELPER PORTS [--report FILE] [--setup FILE] [--filter HEX] -- BWRAP [ARGS...] -- COMMAND...

HELPER is the path of ``pasta`` or, where pasta is missing, ``slirp4netns``
(``-``: no network to make, bwrap alone).
FILE, when given, is written once the network is set up: empty when the Run
has its own network, else why it has none ("pasta: Failed to open() /dev/net/tun:
…"), so the Run's record says what its network is, not what was asked.

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

bwrap's options are handed over in a memfd (``--args FD``), not on its command
line: its pid 1 inside the Run keeps that command line, readable by the Run at
``/proc/1/cmdline``, and the options name Owl's folders and the host's sockets.
FILE after ``--setup`` is written when bwrap failed at its own start, before
the command ran (see ``_set_up``): the Run's failure is then the sandbox's, not
the agent's, however its output reads (an agent can print "bwrap: ..." itself).

HEX, when given, is the Run's seccomp filter (``owl.sandbox.syscalls``, a few
hundred bytes), handed to bwrap the same way (``--seccomp FD``): bwrap loads it
just before it execs the command, and closes both fds.

Standard library only, started with ``-I -S``, and without ``subprocess`` or
``re``, whose imports alone double its start (measured 17 -> 35 ms on a busy
machine): processes are started by fork and exec, their signal mask and
dispositions set in between, and waited for through a pidfd. The exit status
is bwrap's (that is, the agent's).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

READY_TIMEOUT = 10.0
TERM = {signal.SIGTERM}
# Python ignores these for itself; what it starts gets them back (as subprocess does).
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)


def _spawn(
    argv: list[str], keep: tuple[int, ...] = (), *, quiet: int | None = None, block: bool = False
) -> int:
    """Start ``argv`` (searched on PATH) with the fds ``keep`` open in it; with
    ``quiet`` (an fd for its stderr) its stdin and stdout are /dev/null, else
    they are ours (the agent's); SIGTERM blocked in it when ``block``. Every
    other fd of ours is close-on-exec (Python's default). Returns its pid.

    A plain fork and exec (this helper has no threads): ``os.posix_spawn``
    would leave glibc's own signals (32, 33) ignored in what it starts."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing here may return
        if quiet is not None:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(quiet, 2)
        for fd in keep:
            os.set_inheritable(fd, True)
        for sig in RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        if block:
            signal.pthread_sigmask(signal.SIG_BLOCK, TERM)
        os.execvp(argv[0], argv)
    except BaseException as e:
        try:
            os.write(2, f"owl: cannot start {argv[0]}: {e}\n".encode())
        finally:
            os._exit(127)
    os._exit(127)  # pragma: no cover - execvp does not return


def _wait(pid: int, timeout: float | None = None) -> int | None:
    """The exit status of our child ``pid`` as subprocess gives it (negative:
    a signal), or None if it is still running after ``timeout`` seconds."""
    if timeout is not None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                if not select.select([fd], [], [], timeout)[0]:
                    return None
            finally:
                os.close(fd)
    while True:
        try:
            _, raw = os.waitpid(pid, 0)
        except ChildProcessError:
            return 127
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        return os.waitstatus_to_exitcode(raw)


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


def _read_now(fd: int) -> str:
    """What is in the pipe now, without waiting (a writer may hold it open)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _pasta(pasta: str, ports: str, pid: int) -> tuple[str | None, int | None]:
    """Attach pasta to the namespaces of bwrap's child, by open fds: (why not
    or None, a pidfd of pasta as it runs on in the background).

    pasta isolates itself before it opens a namespace path, and bwrap's child
    is not dumpable while it waits, so pasta cannot open ``/proc/PID/ns/net``
    itself (measured): the fds are opened here and handed over. Its pid comes
    back through a pipe given as its pid file: it stays after the sandbox's
    last process has gone (measured), so it is ended here then.

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
    if _ipv4_default():
        argv.append("-4")  # IPv4 only: its start takes half the time (measured 45 -> 28 ms)
    fds: list[int] = []
    pid_r = err_r = -1
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        fds.append(net)
        if os.getuid() == 0:
            argv += ["--runas", "0"]  # else it drops to nobody, and cannot join
        if _own_userns(pid):  # always, but for root where none could be made
            user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
            fds.append(user)
            argv += ["--userns", f"/proc/self/fd/{user}"]
        pid_r, pid_w = os.pipe()
        fds.append(pid_w)
        err_r, err_w = os.pipe()
        fds.append(err_w)
        argv += ["--pid", f"/proc/self/fd/{pid_w}", "--netns", f"/proc/self/fd/{net}"]
        child = _spawn(argv, (net, *fds[1:-1]), quiet=err_w, block=True)
    except OSError as e:
        for fd in (pid_r, err_r):
            if fd >= 0:
                os.close(fd)
        return str(e), None
    finally:
        for fd in fds:
            os.close(fd)
    code = _wait(child, READY_TIMEOUT)
    if code is None:
        os.kill(child, signal.SIGKILL)
        _wait(child)
    said = _read_now(pid_r).strip()
    err = _read_now(err_r)
    if code != 0:
        lines = [ln for ln in err.splitlines() if "syslog" not in ln]
        return (lines[-1] if lines else f"exit {code}"), None
    return None, _pidfd(int(said), pasta) if said.isdigit() else None


def _own_userns(pid: int) -> bool:
    """Whether bwrap's child ``pid`` is in a user namespace other than ours
    (always, but for root where none could be made): the helper must join it."""
    try:
        return os.stat(f"/proc/{pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino
    except OSError:
        return os.getuid() != 0


def _ipv4_default() -> bool:
    """Whether the host has an IPv4 default route: then the Run's network is
    IPv4 only (its start waits no more for IPv6's set-up); a host reached
    over IPv6 alone keeps both."""
    try:
        with open("/proc/net/route", "rb") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return False
    return any(len(r.split()) > 7 and r.split()[1] == b"00000000" for r in rows)


def _pidfd(pid: int, program: str) -> int | None:
    """A pidfd of ``pid`` if it is ``program`` now: signalled through it later,
    never a process that took the pid over once pasta was gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:  # pasta re-executes itself (passt.avx2): its first argument stays ours
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            same = f.read().split(b"\0", 1)[0] == os.fsencode(program)
    except OSError:
        same = False
    if not same:
        os.close(fd)
        return None
    return fd


class _Slirp:
    """slirp4netns running for the sandbox; ``end()`` once the sandbox has ended."""

    def __init__(self, pid: int, exit_w: int) -> None:
        self.pid, self.exit_w = pid, exit_w

    def end(self) -> None:
        os.close(self.exit_w)  # its word to leave
        if _wait(self.pid, READY_TIMEOUT) is None:
            os.kill(self.pid, signal.SIGKILL)
            _wait(self.pid)


def _slirp(slirp: str, pid: int) -> tuple[str | None, _Slirp | None]:
    """Attach slirp4netns to bwrap's child's namespaces (by open fds, as pasta):
    (why not or None, what ends it once the sandbox has)."""
    fds: list[int] = []
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        fds.append(net)
        argv = [
            slirp,
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            f"--ready-fd={ready_w}",
            f"--exit-fd={exit_r}",
            "--netns-type=path",
        ]
        if _own_userns(pid):
            user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
            fds.append(user)
            argv.append(f"--userns-path=/proc/self/fd/{user}")
        argv += [f"/proc/self/fd/{net}", "tap0"]
        null = os.open(os.devnull, os.O_WRONLY)
        fds.append(null)
        # chatty on stderr; SIGTERM blocked as for pasta
        child = _spawn(argv, (*fds[:-1], ready_w, exit_r), quiet=null, block=True)
    except OSError as e:
        os.close(exit_w)
        os.close(ready_r)
        return str(e), None
    finally:
        for fd in (*fds, ready_w, exit_r):
            os.close(fd)
    up = select.select([ready_r], [], [], READY_TIMEOUT)[0] and os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    helper = _Slirp(child, exit_w)
    if not up:
        helper.end()
        return "slirp4netns did not bring the network up", None
    return None, helper


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


class _Pasta:
    """pasta running in the background for the sandbox, by its pidfd."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def end(self) -> None:
        try:
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)  # nothing left to carry
        except OSError:
            pass
        os.close(self.fd)


def _attach(helper: str, ports: str, pid: int) -> tuple[str | None, _Pasta | _Slirp | None]:
    """The namespace's network, by whichever helper was named: (why not, its end).

    bwrap's child sets up the namespace's loopback as soon as bwrap has said
    its pid (long before it reads the block fd), and either helper configuring
    the namespace at that moment makes that set-up fail and the Run with it
    (seen with both: "loopback: Failed RTM_NEWADDR"): they start once it is done."""
    _loopback_set(pid)
    if os.path.basename(helper).startswith("slirp4netns"):
        return _slirp(helper, pid)
    why, fd = _pasta(helper, ports, pid)
    return why, None if fd is None else _Pasta(fd)


def _present(bwrap: list[str]) -> list[str]:
    """bwrap's argv without the /dev/null laid over a file (a host socket, a
    hidden file) that is gone since the argv was made: bwrap would have to
    make it on the read-only root, and the Run would fail for a socket that a
    program closed a moment before. Where there is none, there is nothing to cover."""
    out: list[str] = []
    i = 0
    while i < len(bwrap):
        if bwrap[i] == "--" or i + 2 >= len(bwrap):
            return out + bwrap[i:]
        if bwrap[i : i + 2] == ["--ro-bind", "/dev/null"] and not os.path.lexists(bwrap[i + 2]):
            i += 3
            continue
        out.append(bwrap[i])
        i += 1
    return out


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


def _memfd(name: str, data: bytes) -> int:
    """An inheritable memfd holding ``data``, read from its start."""
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _hidden(
    bwrap: list[str], extra: list[str], seccomp: bytes | None
) -> tuple[list[str], tuple[int, ...]]:
    """bwrap's argv with its options (``extra`` first) in a memfd and the
    filter in another: (the argv, the fds it must inherit)."""
    at = bwrap.index("--")
    options, command = [*extra, *bwrap[1:at]], bwrap[at:]
    fds: tuple[int, ...] = ()
    if seccomp is not None:
        filt = _memfd("owl-seccomp", seccomp)
        options += ["--seccomp", str(filt)]
        fds = (filt,)
    args = _memfd("owl-bwrap-args", b"".join(o.encode() + b"\0" for o in options))
    return [bwrap[0], "--args", str(args), *command], (*fds, args)


class _Args:
    """netns.py's own options, then bwrap's argv."""

    def __init__(self, argv: list[str]) -> None:
        self.helper, self.ports, rest = argv[0], argv[1], argv[2:]
        self.report: str | None = None  # how the network came out
        self.setup: str | None = None  # written when bwrap fails at its own start
        self.seccomp: bytes | None = None
        while rest and rest[0] != "--":
            if rest[0] == "--report":
                self.report = rest[1]
            elif rest[0] == "--setup":
                self.setup = rest[1]
            elif rest[0] == "--filter":
                self.seccomp = bytes.fromhex(rest[1])
            else:
                raise SystemExit(f"netns.py: unknown option {rest[0]}")
            rest = rest[2:]
        assert rest and rest[0] == "--" and rest[1:]
        self.bwrap = _present(rest[1:])


def _set_up(status: int) -> bool:
    """Whether bwrap's set-up finished and it ran the command, from what it wrote
    to ``--json-status-fd``: it writes the command's "exit-code" only then, and
    from its own process outside the Run, where nothing inside can write or
    stop it (its fd is not passed in). A start that failed at bwrap's own
    set-up (a bind it could not make, a filter it could not load) has none."""
    data = b""
    while True:
        chunk = _read_some(status)
        if not chunk:
            return b'"exit-code"' in data
        data += chunk


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def _write_setup(path: str | None, code: int) -> None:
    """Say that bwrap failed at its own start (the file is Owl's, out of the Run's sight)."""
    if path is not None:
        _report(path, f"bwrap could not set up the sandbox (exit {code})")


def main(argv: list[str]) -> int:
    args = _Args(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # before bwrap and pasta: they inherit it
    status_r, status_w = os.pipe()
    extra = ["--json-status-fd", str(status_w)]
    info_r = block_w = -1
    if args.helper != "-":
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        extra += ["--unshare-net", "--info-fd", str(info_w), "--block-fd", str(block_r)]
    command, fds = _hidden(args.bwrap, extra, args.seccomp)
    passed = (status_w, *fds) if args.helper == "-" else (status_w, info_w, block_r, *fds)
    proc = _spawn(command, passed)
    for fd in passed:
        os.close(fd)
    network = None
    if args.helper != "-":
        network = _network(args, info_r)
        try:
            os.write(block_w, b"go")
        except OSError:
            pass
        os.close(block_w)
    code = _wait(proc)
    set_up = _set_up(status_r)  # bwrap has ended: the pipe holds all it wrote
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


def _network(args: _Args, info_r: int) -> _Pasta | _Slirp | None:
    """The Run's network, once bwrap has said its child's pid (None: none made)."""
    pid = _child_pid(info_r)  # kept open: bwrap writes more (a closed pipe kills it)
    if pid is None:
        return None
    why, network = _attach(args.helper, args.ports, pid)
    if why is not None:
        os.write(2, f"owl: no user-mode networking ({why}); the Run has no network\n".encode())
        why = f"{os.path.basename(args.helper)}: {why}"
    _report(args.report, why)
    return network


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
