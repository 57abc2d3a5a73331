"""Host unix sockets: a read-only bind does not stop ``connect()``.

docker's socket is root on the machine; podman's, snapd's, the system bus and
an ssh-agent's are as much. A Run sees ``/run`` and ``/var/run`` as empty
folders of its own and ``/tmp`` as its own; every other socket the host has
bound where the Run could see it (in the home, under /var) has /dev/null laid
over it, also one bound by a process of another network namespace (a
container's: the host's /proc/net/unix does not list it); an abstract socket is
per network namespace, and the Run has its own. Beneath those, the Run's
seccomp filter refuses every unix socket it would make (and io_uring, which
makes sockets of its own), so one the host binds later in a folder it sees
(the project, its ``.git``) cannot be reached either. ``sandbox.sockets``
opens them on purpose (host sockets it names, or ``"own"``: the Run's own),
and ``owl jobs show`` says so."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from escapes.asuser import compile_probe
from escapes.harness import base, daemon, done, landed, person, project, refused, who
from support.need import programs
from owlproc import wait_for
from support.netns_server import in_own_netns

__all__ = ["base", "who"]

CONNECT = r"""
probe() {
  if python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
assert s.recv(5) == b"hello"' "$2" >/dev/null 2>&1; then echo "connected: $1"; else echo "refused: $1"; fi
}
"""
PROBE = (
    CONNECT
    + r"""probe "a socket in /run (mode 666)" "$IN_RUN"
probe "a socket in /var/run" "/var/run/$(basename "$IN_RUN")"
probe "a socket in the home" "$IN_HOME"
probe "a socket elsewhere in sight" "$IN_SIGHT"
probe "a socket in the host's /tmp" "$IN_TMP"
probe "an abstract socket" "$ABSTRACT"
"""
)

WAYS = (
    "a socket in /var/run",
    "a socket in the home",
    "a socket elsewhere in sight",
    "a socket in the host's /tmp",
    "an abstract socket",
)


@contextlib.contextmanager
def servers(*paths: str) -> Iterator[None]:
    """A server on each path (a leading NUL: abstract) that greets whoever connects."""
    socks = []
    for path in paths:
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        if not path.startswith("\0"):
            os.chmod(path, 0o666)
        s.listen(8)
        socks.append(s)
        threading.Thread(target=_greet, args=(s,), daemon=True).start()
    try:
        yield
    finally:
        for s, path in zip(socks, paths):
            s.shutdown(socket.SHUT_RDWR)  # wakes its accept(): the name is let go
            s.close()
            if not path.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def _greet(s: socket.socket) -> None:
    while True:
        try:
            conn, _ = s.accept()
        except OSError:
            return
        with conn:
            conn.sendall(b"hello")


def reached(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        return s.recv(5) == b"hello"


def test_no_host_socket_answers_but_the_one_opened_on_purpose(base: Path) -> None:
    programs("bwrap", "pasta")
    home = person(base)
    (home / ".local" / "share" / "app").mkdir(parents=True)
    (base / "var" / "lib" / "service").mkdir(parents=True)
    tag = f"owl-escape-{os.getpid()}"
    paths = {
        "IN_RUN": f"/run/{tag}.sock",
        "IN_HOME": str(home / ".local" / "share" / "app" / "app.sock"),
        "IN_SIGHT": str(base / "var" / "lib" / "service" / "service.sock"),
        "IN_TMP": f"/tmp/{tag}.sock",
    }
    proj = project(base)
    with servers(*paths.values(), f"\0{tag}"):
        assert all(reached(p) for p in paths.values())  # each answers outside
        d = daemon(
            base,
            home,
            PROBE,
            known={**paths, "ABSTRACT": f"\0{tag}"},
            agents={"opener": {"sandbox": {"sockets": [paths["IN_RUN"]]}}},
        )
        with d:
            shut = d.add("do the work", proj)
            opened = d.add("do the work", proj, "--agent", "opener")
            d.ok("start")
            j, log = done(d, shut)
            refused(log, "a socket in /run (mode 666)", *WAYS)
            assert "connected" not in log, log
            landed(proj, j["branch"])
            d.ok("start")  # one Run now, for the head of the queue: the second Job
            j, log = done(d, opened)
            refused(log, *WAYS[1:])
            # the same socket, as /var/run leads to /run
            assert "connected: a socket in /run (mode 666)" in log, log
            assert "connected: a socket in /var/run" in log, log
            landed(proj, j["branch"])
            label = j["runs"][-1]["contained"]
            assert label.endswith(f"; unix sockets: {paths['IN_RUN']}"), label
            assert label in d.ok("jobs", "show", str(opened))


ELSEWHERE = "a socket bound in another network namespace"
MOUNTED = "a socket bound in a container's volume, at its own path"


def test_a_socket_bound_in_another_network_namespace_answers_only_when_opened(
    base: Path,
) -> None:
    """A container's (or a rootless podman's) socket in the home: its process
    is in a network namespace of its own, so the host's /proc/net/unix does
    not list it, and a connect() to its path from inside a Run answers all the
    same unless it is masked too. Also one a container binds in its volume
    (a folder of the home mounted at another path): listed by its own path."""
    programs("bwrap", "pasta")
    home = person(base)
    (home / ".local" / "share" / "containers").mkdir(parents=True)
    path = str(home / ".local" / "share" / "containers" / "api.sock")
    volume = (str(home / "code" / "app"), str(base / "container" / "app"))
    for folder in volume:
        Path(folder).mkdir(parents=True)
    proj = project(base)
    with in_own_netns(path), in_own_netns(f"{volume[1]}/app.sock", volume):
        in_volume = f"{volume[0]}/app.sock"
        assert reached(path) and reached(in_volume)  # each answers outside, by the host's path
        d = daemon(
            base,
            home,
            CONNECT + f'probe "{ELSEWHERE}" "$ELSEWHERE"\nprobe "{MOUNTED}" "$MOUNTED"\n',
            known={"ELSEWHERE": path, "MOUNTED": in_volume},
            agents={"opener": {"sandbox": {"sockets": [path]}}},
        )
        with d:
            shut = d.add("do the work", proj)
            opened = d.add("do the work", proj, "--agent", "opener")
            d.ok("start")
            j, log = done(d, shut)
            refused(log, ELSEWHERE, MOUNTED)
            landed(proj, j["branch"])
            d.ok("start")
            j, log = done(d, opened)
            assert f"connected: {ELSEWHERE}" in log, log
            refused(log, MOUNTED)
            landed(proj, j["branch"])
            assert j["runs"][-1]["contained"].endswith(f"; unix sockets: {path}")


LATE = (
    CONNECT
    + r"""touch started
for i in $(seq 600); do [ -e go ] && break; sleep 0.2; done
[ -e go ] && echo "told to go"
probe "a socket bound in the home after the Run started" "$IN_HOME"
probe "a socket bound in /var/tmp after the Run started" "$IN_VAR_TMP"
probe "a service's socket bound again after the Run started" "$RESTARTED"
probe "a socket bound in another network namespace after the Run started" "$ELSEWHERE"
probe "an abstract socket bound after the Run started" "$ABSTRACT"
"""
)
LATE_WAYS = (
    "a socket bound in the home after the Run started",
    "a socket bound in /var/tmp after the Run started",
    "a service's socket bound again after the Run started",
    "a socket bound in another network namespace after the Run started",
    "an abstract socket bound after the Run started",
)


def test_no_socket_bound_after_the_run_started_answers(base: Path, who) -> None:
    """A list of the host's sockets read at the start cannot cover one bound
    later (git's credential-cache daemon the person starts by pushing, a
    service that restarts: its old path unlinked, the /dev/null over it gone
    with it). The Run's view holds no folder of the host's such a socket
    appears in: its home, /var and /run are its own."""
    programs("bwrap", "pasta")
    home = person(base)
    (home / ".cache" / "git" / "credential").mkdir(parents=True)
    (home / ".local" / "share" / "containers").mkdir(parents=True)
    tag = f"owl-late-{os.getpid()}"
    paths = {
        "IN_HOME": str(home / ".cache" / "git" / "credential" / "socket"),
        "IN_VAR_TMP": f"/var/tmp/{tag}.sock",
        "RESTARTED": f"/run/{tag}-service.sock",
        "ELSEWHERE": str(home / ".local" / "share" / "containers" / "late.sock"),
    }
    proj = project(base)
    d = daemon(base, home, LATE, known={**paths, "ABSTRACT": f"\0{tag}"}, who=who)
    with servers(paths["RESTARTED"]), d:
        job = d.add("do the work", proj)
        d.ok("start")
        wt = Path(wait_for(lambda: d.job(job)["worktree"], 60, what="the worktree"))
        wait_for(lambda: (wt / "started").exists(), 120, what="the Run to start")
        os.unlink(paths["RESTARTED"])  # the service restarts: its socket bound anew
        with (
            servers(paths["IN_HOME"], paths["IN_VAR_TMP"], paths["RESTARTED"], f"\0{tag}"),
            in_own_netns(paths["ELSEWHERE"]),
        ):
            assert all(reached(p) for p in paths.values())  # each answers outside
            (wt / "go").write_text("")
            if who is not None:
                os.chown(wt / "go", who[0].pw_uid, who[0].pw_gid)
            j, log = done(d, job)
    assert "told to go" in log, log
    refused(log, *LATE_WAYS)
    assert "connected" not in log, log
    landed(proj, j["branch"])


OWN = r"""
if python3 -c 'import socket
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/own.sock")
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect("/tmp/own.sock")
a, _ = s.accept()
a.sendall(b"hello")
assert c.recv(5) == b"hello"' >/dev/null 2>&1; then echo "connected: its own listener in /tmp"
else echo "refused: its own listener in /tmp"; fi
"""
IN_PROJECT = (
    CONNECT
    + OWN
    + r"""touch started
for i in $(seq 600); do [ -e go ] && break; sleep 0.2; done
[ -e go ] && echo "told to go"
probe "a socket bound in the project after the Run started" "$IN_PROJECT"
probe "a socket bound in the project's .git after the Run started" "$IN_GIT"
try "a datagram pair aimed at a socket bound in the project" "$PROBE dgram-pair $DGRAM"
try "io_uring, which makes sockets of its own" "$PROBE io-uring"
"""
)
PROJECT_WAYS = (
    "its own listener in /tmp",
    "a socket bound in the project after the Run started",
    "a socket bound in the project's .git after the Run started",
    "a datagram pair aimed at a socket bound in the project",
    "io_uring, which makes sockets of its own",
)


@contextlib.contextmanager
def datagrams(path: str) -> Iterator[list[bytes]]:
    """A datagram socket at ``path``; what it received, once the block ends."""
    got: list[bytes] = []
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    os.chmod(path, 0o666)
    s.setblocking(False)
    try:
        yield got
    finally:
        with contextlib.suppress(BlockingIOError):
            while True:
                got.append(s.recv(64))
        s.close()
        os.unlink(path)


def test_no_socket_bound_in_the_project_after_the_run_started_answers(base: Path, who) -> None:
    """The Run sees the project and its .git from the host, where the person's
    tools bind sockets whenever they like (git's fsmonitor daemon, a dev
    server): a mask laid at the start cannot cover one bound later. The Run
    may make no unix socket at all (nor a datagram pair, which can be aimed
    at any path, nor io_uring, which makes sockets without the system call)
    unless ``sandbox.sockets`` opens them."""
    programs("bwrap", "pasta", "gcc")
    probe = compile_probe(base)
    home = person(base)
    proj = project(base)
    paths = {
        "IN_PROJECT": str(proj / "dev-server.sock"),
        "IN_GIT": str(proj / ".git" / "fsmonitor--daemon.ipc"),
        "DGRAM": str(proj / "notify.sock"),
    }
    d = daemon(
        base,
        home,
        IN_PROJECT,
        known={**paths, "PROBE": probe},
        sandbox={"read": [str(probe)]},
        who=who,
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        wt = Path(wait_for(lambda: d.job(job)["worktree"], 60, what="the worktree"))
        wait_for(lambda: (wt / "started").exists(), 120, what="the Run to start")
        with servers(paths["IN_PROJECT"], paths["IN_GIT"]), datagrams(paths["DGRAM"]) as got:
            assert reached(paths["IN_PROJECT"]) and reached(paths["IN_GIT"])  # outside
            (wt / "go").write_text("")
            if who is not None:
                os.chown(wt / "go", who[0].pw_uid, who[0].pw_gid)
            j, log = done(d, job)
    assert "told to go" in log, log
    refused(log, *PROJECT_WAYS)
    assert "connected" not in log and got == [], (log, got)
    assert j["runs"][-1]["contained"].endswith("; unix sockets: none"), j["runs"][-1]
    landed(proj, j["branch"])


OPENED = (
    CONNECT
    + OWN
    + r"""probe "the host socket sandbox.sockets names" "$NAMED"
"""
)


def test_sockets_own_gives_the_run_its_own_and_a_named_one_answers(base: Path, who) -> None:
    """``sandbox.sockets = ["own"]``: a project's tests may run a server on a
    socket of the Run's own (Postgres, Redis in /tmp); a host socket it names
    answers, one it does not name stays out of sight."""
    programs("bwrap", "pasta")
    home = person(base)
    proj = project(base)
    (base / "srv").mkdir()
    named = str(base / "srv" / "api.sock")
    with servers(named):
        d = daemon(
            base,
            home,
            OPENED,
            known={"NAMED": named},
            agents={
                "own": {"sandbox": {"sockets": ["own"]}},
                "opener": {"sandbox": {"sockets": [named]}},
            },
            who=who,
        )
        with d:
            own = d.add("do the work", proj, "--agent", "own")
            opener = d.add("do the work", proj, "--agent", "opener")
            d.ok("start")
            j, log = done(d, own)
            assert "connected: its own listener in /tmp" in log, log
            refused(log, "the host socket sandbox.sockets names")
            assert j["runs"][-1]["contained"].endswith("; unix sockets: own"), j["runs"][-1]
            landed(proj, j["branch"])
            d.ok("start")
            j, log = done(d, opener)
            assert "connected: its own listener in /tmp" in log, log
            assert "connected: the host socket sandbox.sockets names" in log, log
            label = j["runs"][-1]["contained"]
            assert label.endswith(f"; unix sockets: {named}"), label
            assert label in d.ok("jobs", "show", str(opener))
            landed(proj, j["branch"])
