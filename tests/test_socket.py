"""The control socket, attacked and crowded: the real daemon, raw bytes and the real `owl`.

Every refusal must come back as one JSON reply with a one-line reason, and
the daemon must keep serving everyone else afterwards. Only the same user may
ask anything: the folder keeps others out, and SO_PEERCRED does when the
folder is opened up on purpose.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from owl.control import protocol
from owl.settings.paths import get_paths
from owlproc import OWL, OwlDaemon, make_project, wait_for


def socket_of(home: Path, env: dict[str, str] | None = None) -> Path:
    """Where the daemon for this OWL_HOME listens (the same rule the CLI uses)."""
    saved = dict(os.environ)
    try:
        os.environ.update(env or {})
        os.environ["OWL_HOME"] = str(home)
        return get_paths().socket
    finally:
        os.environ.clear()
        os.environ.update(saved)


def exchange(
    path: Path, payload: bytes, *, close_write: bool = True, timeout: float = 10.0
) -> dict[str, Any] | None:
    """Send raw bytes, read until the daemon closes; the reply, parsed, or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(path))
    try:
        s.sendall(payload)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        buf = bytearray()
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if not buf:
        return None
    assert buf.endswith(b"\n") and buf.count(b"\n") == 1, buf[:200]
    return json.loads(buf)


def request(verb: str, **args: Any) -> bytes:
    return protocol.request(verb, args)


def jobs(d: OwlDaemon) -> list[dict]:
    return d.json("jobs", "list")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("socket")
    project = make_project(root / "proj")
    with OwlDaemon(root / "home") as d:
        d.project = project  # type: ignore[attr-defined]
        d.sock = socket_of(d.home)  # type: ignore[attr-defined]
        yield d


# --------------------------------------------------------------- the file


def test_the_socket_is_0600_in_a_0700_folder(daemon):
    st = os.stat(daemon.sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(daemon.sock.parent).st_mode) == 0o700
    assert st.st_uid == os.getuid()


# ---------------------------------------------------------- bad messages

BAD = [
    pytest.param(b"hello\n", 2, "not a JSON request", id="not-json"),
    pytest.param(b"\xff\xfe\x00garbage\n", 2, "not a JSON request", id="not-utf8"),
    pytest.param(
        b'{"v":1,"verb":"add","args":{"prompt":"caf\xe9"}}\n',
        2,
        "not a JSON",
        id="latin1-inside-json",
    ),
    pytest.param(
        b'{"v":1,"verb":"add","args":{"prompt":"\\ud800","project":"/"}}\n',
        2,
        "not valid Unicode",
        id="lone-surrogate",
    ),
    pytest.param(b"[1, 2, 3]\n", 2, "JSON object", id="array"),
    pytest.param(b'{"v":1}\n', 2, "needs a verb", id="no-verb"),
    pytest.param(b'{"v":1,"verb":"status","args":[1]}\n', 2, "args (object)", id="args-list"),
    pytest.param(b'{"v":1,"verb":"sta', 2, "not a JSON request", id="truncated"),
    pytest.param(b'{"v":99,"verb":"status","args":{}}\n', 2, "protocol 1", id="newer-version"),
    pytest.param(b'{"verb":"status","args":{}}\n', 2, "protocol None", id="no-version"),
    pytest.param(
        b'{"v":1,"verb":"launch-missiles","args":{}}\n', 1, "unknown verb", id="unknown-verb"
    ),
    pytest.param(
        b'{"v":1,"verb":"jobs.show","args":{"id":"7"}}\n', 1, "whole number", id="id-as-string"
    ),
    pytest.param(
        b'{"v":1,"verb":"jobs.show","args":{"id":true}}\n', 1, "whole number", id="id-as-bool"
    ),
    pytest.param(
        b'{"v":1,"verb":"add","args":{"prompt":5,"project":"/"}}\n',
        1,
        "must be a string",
        id="prompt-not-string",
    ),
    pytest.param(
        b'{"v":1,"verb":"shift.start","args":{"for_s":"forever"}}\n',
        1,
        "number of seconds",
        id="shift-length-string",
    ),
]


@pytest.mark.parametrize("payload, code, words", BAD)
def test_a_bad_message_gets_one_line_refusal_and_the_daemon_goes_on(daemon, payload, code, words):
    before = jobs(daemon)
    reply = exchange(daemon.sock, payload)
    assert reply is not None
    assert reply["v"] == protocol.VERSION and reply["ok"] is False
    assert reply["exit"] == code
    assert words in reply["error"] and "\n" not in reply["error"]
    # nothing changed, and the next client is served
    assert jobs(daemon) == before
    assert exchange(daemon.sock, request("ping"))["data"]["pid"] == daemon.proc.pid


def test_a_wrong_protocol_version_names_both_versions(daemon):
    reply = exchange(daemon.sock, b'{"v":2,"verb":"status","args":{}}\n')
    assert reply["ok"] is False and reply["exit"] == 2
    assert "protocol 1" in reply["error"] and "protocol 2" in reply["error"]
    assert "restart the daemon" in reply["error"]


def test_an_oversized_request_is_refused_and_the_daemon_goes_on(daemon):
    big = b'{"v":1,"verb":"add","args":{"prompt":"' + b"x" * (2 << 20) + b'"}}\n'
    reply = exchange(daemon.sock, big)
    assert reply is not None and reply["ok"] is False and reply["exit"] == 2
    assert "larger than 1,048,576 bytes" in reply["error"]
    # an endless stream without a newline is cut off too
    reply = exchange(daemon.sock, b"y" * (protocol.MAX_REQUEST + 10), close_write=False)
    assert reply is not None and "larger than" in reply["error"]
    assert daemon.status()["machine"] is not None


def test_a_client_that_says_nothing_does_not_hold_up_the_others(daemon):
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(daemon.sock))
    trickle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    trickle.connect(str(daemon.sock))
    t0 = time.monotonic()
    try:
        for _ in range(3):
            t = time.monotonic()
            assert daemon.owl("status", "--json").returncode == 0
            assert time.monotonic() - t < 3.0
        # a client that sends a byte now and then gets no more time than a silent one
        for ch in b'{"v":1,':
            trickle.sendall(bytes([ch]))
            time.sleep(0.3)
            if time.monotonic() - t0 > 4.0:
                break
        silent.settimeout(10)
        trickle.settimeout(10)
        answers = []
        for s in (silent, trickle):
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
            answers.append(json.loads(buf))
        waited = time.monotonic() - t0
    finally:
        silent.close()
        trickle.close()
    for a in answers:
        assert a["ok"] is False and a["exit"] == 2 and "no request within" in a["error"]
    assert 4.0 <= waited < 8.0


@pytest.mark.isolated  # 1,500 connects race the accept loop: alone, after the parallel run
def test_a_flood_of_silent_connections_is_bounded_and_others_are_still_served(daemon):
    import psutil

    rss_before = psutil.Process(daemon.proc.pid).memory_info().rss
    flood: list[socket.socket] = []
    busy = 0
    try:
        for _ in range(1500):  # more than the daemon keeps open at once
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(daemon.sock))
            s.send(b'{"v": 1, "verb": "sta')  # and never finish the request
            flood.append(s)
        threads = psutil.Process(daemon.proc.pid).num_threads()
        # a person's command is answered at once, however many wait silently
        t0 = time.monotonic()
        st = daemon.status()
        assert time.monotonic() - t0 < 2.0 and "machine" in st
        rss_grew = psutil.Process(daemon.proc.pid).memory_info().rss - rss_before
        assert rss_grew < 64 << 20, rss_grew  # bounded in memory
        assert threads < 40, threads  # a socket each, not a thread each
        # past the bound, newcomers are told the daemon is busy; the rest time out
        answers = []
        for s in flood:
            s.settimeout(10)
            try:
                answers.append(s.recv(4096))
            except OSError:
                answers.append(b"")
        busy = sum(b"busy" in a for a in answers)
        late = sum(b"no request within 5 s" in a for a in answers)
        assert busy > 0 and late > 0 and busy + late == len(flood)
    finally:
        for s in flood:
            s.close()
    assert daemon.status()["machine"] is not None


def test_twenty_clients_at_once_are_all_answered_correctly(daemon):
    before = {j["id"] for j in jobs(daemon)}
    results: dict[int, subprocess.CompletedProcess] = {}

    def one(i: int) -> None:
        if i % 2:
            results[i] = daemon.owl(
                "add", "--json", "--project", str(daemon.project), "--", f"sleep=60 client-{i}"
            )
        else:
            results[i] = daemon.owl("status", "--json")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 20
    added = {}
    for i, p in sorted(results.items()):
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        if i % 2:
            assert doc["prompt"] == f"sleep=60 client-{i}" and doc["state"] == "pending"
            added[doc["id"]] = i
        else:
            assert {"machine", "paused", "runs", "queue"} <= set(doc)
    assert len(added) == 10  # ten distinct Jobs
    listed = [j for j in jobs(daemon) if j["id"] not in before]
    assert sorted(j["id"] for j in listed) == sorted(added)
    positions = [j["position"] for j in jobs(daemon) if j["position"]]
    assert positions == list(range(1, len(positions) + 1))
    for job_id in added:
        daemon.ok("jobs", "drop", str(job_id))


def test_a_client_that_dies_mid_request_loses_nothing_queued(daemon):
    keep = [daemon.add(f"sleep=60 keep-{i}", daemon.project) for i in range(3)]
    before = jobs(daemon)
    # half a request, then gone: nothing happens
    add = request("add", prompt="sleep=60 half", project=str(daemon.project))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(daemon.sock))
    s.sendall(add[: len(add) // 2])
    s.close()
    # a whole request, then gone before the answer: it is carried out
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(daemon.sock))
    s.sendall(request("add", prompt="sleep=60 whole", project=str(daemon.project)))
    s.close()
    wait_for(
        lambda: any(j["title"] == "sleep=60 whole" for j in jobs(daemon)),
        what="the whole request carried out",
    )
    # real `owl add` processes killed at once
    for i in range(4):
        p = subprocess.Popen(
            [*OWL, "add", "--project", str(daemon.project), "--", f"sleep=60 killed-{i}"],
            env=daemon.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.03 * i)
        p.send_signal(signal.SIGKILL)
        p.wait()
    after = jobs(daemon)
    titles = [j["title"] for j in after]
    assert "sleep=60 half" not in titles
    assert [j for j in after if j["id"] in {b["id"] for b in before}] == before
    for j in after:  # whatever arrived, arrived whole
        assert j["title"] in {b["title"] for b in before} | {"sleep=60 whole"} | {
            f"sleep=60 killed-{i}" for i in range(4)
        }
    assert [j["position"] for j in after if j["position"]] == list(
        range(1, 1 + sum(1 for j in after if j["position"]))
    )
    assert set(keep) <= {j["id"] for j in after}
    for j in after:
        daemon.ok("jobs", "drop", str(j["id"]))


def test_an_older_command_and_a_newer_daemon_fail_in_one_line(tmp_path):
    """The CLI against something that answers in another protocol version."""
    home = tmp_path / "home"
    path = socket_of(home)
    path.parent.mkdir(parents=True, mode=0o700)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)
    replies = [b'{"v":2,"ok":true,"data":{}}\n', b"this is not json\n", b""]

    def serve() -> None:
        for reply in replies:
            conn, _ = srv.accept()
            conn.recv(1 << 16)
            if reply:
                conn.sendall(reply)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    env = dict(os.environ, OWL_HOME=str(home))
    try:
        outs = [
            subprocess.run([*OWL, "pause"], env=env, capture_output=True, text=True, timeout=30)
            for _ in replies
        ]
    finally:
        srv.close()
    wanted = ["speaks protocol 2", "not JSON", "without answering"]
    for p, words in zip(outs, wanted):
        assert p.returncode == 1, p.stderr
        assert p.stderr.count("\n") == 1 and words in p.stderr and "Traceback" not in p.stderr


# ------------------------------------------------------- daemon lifetime


def test_a_second_daemon_refuses_and_names_the_first(tmp_path):
    with OwlDaemon(tmp_path / "home") as d:
        p = subprocess.run([*OWL, "daemon"], env=d.env, capture_output=True, text=True, timeout=30)
        assert p.returncode == 1
        lines = [x for x in p.stderr.splitlines() if x.startswith("owl:")]
        assert len(lines) == 1 and f"pid {d.proc.pid}" in lines[0], p.stderr
        assert "already running" in lines[0]
        assert d.owl("status", "--json").returncode == 0  # the first one is untouched


def test_a_stale_socket_from_a_killed_daemon_is_replaced(tmp_path):
    project = make_project(tmp_path / "proj")
    d = OwlDaemon(tmp_path / "home")
    with d:
        job = d.add("sleep=60", project)
        path = socket_of(d.home)
        d.kill()  # SIGKILL: no clean-up at all
        assert path.exists()
        p = d.owl("pause")
        assert p.returncode == 3 and "no Owl daemon is running" in p.stderr
        assert p.stderr.count("\n") == 1
        p = d.owl("status")
        assert p.returncode == 3 and "1 job queued" in p.stdout
        d.start()
        # the same path answers again (the old file refused every connection)
        assert d.owl("pause").returncode == 0
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert [j["id"] for j in d.status()["queue"]] == [job]


def test_a_deep_owl_home_gets_a_short_socket(tmp_path):
    project = make_project(tmp_path / "proj")
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "home"
    assert len(os.fsencode(deep / "run" / "owl.sock")) > 100
    with OwlDaemon(deep) as d:
        path = socket_of(deep)
        assert len(os.fsencode(path)) <= 100
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        job = d.add("sleep=60", project)
        assert d.job(job)["position"] == 1
        assert d.stop() == 0
    assert not path.exists()


# -------------------------------------------------------------- two users


@pytest.fixture(scope="module")
def stranger():
    """A second user on the machine, made for this test and removed after it."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a second user")
    name = f"owlt{os.getpid() % 100000}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_user(
    user: pwd.struct_passwd, env: dict[str, str], shared: Path, *args: str
) -> subprocess.CompletedProcess:
    """The real `owl` command run as `user`, from a copy of the package in
    `shared` with the base interpreter: the checkout and its venv may sit in a
    folder only root can enter (e.g. under `mktemp -d`)."""
    env = dict(
        env,
        HOME="/",
        USER=user.pw_name,
        LOGNAME=user.pw_name,
        PYTHONPATH=str(shared),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("XDG_RUNTIME_DIR", None)
    return subprocess.run(
        [sys._base_executable, "-m", "owl", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
    )


def test_another_user_can_neither_connect_nor_be_served(stranger):
    # A home others may walk through (tmp_path's parents are root's own 0700).
    root = Path(tempfile.mkdtemp(prefix="owl-users-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shared = root / "app"
        shutil.copytree(
            Path(__file__).resolve().parent.parent / "app" / "owl",
            shared / "owl",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        project = make_project(root / "proj")
        with OwlDaemon(root / "home") as d:
            d.home.chmod(0o755)
            path = socket_of(d.home)
            # the 0700 folder keeps them out
            p = as_user(stranger, d.env, shared, "add", "--project", str(project), "--", "sleep=1")
            assert p.returncode == 1, p.stderr
            assert "belongs to another user" in p.stderr and p.stderr.count("\n") == 1
            # opened up on purpose: the daemon itself refuses them, by SO_PEERCRED
            path.parent.chmod(0o777)
            path.chmod(0o666)
            for args in (
                ("add", "--project", str(project), "--", "sleep=1"),
                ("status", "--json"),
                ("pause",),
            ):
                p = as_user(stranger, d.env, shared, *args)
                assert p.returncode == 1, (args, p.stdout, p.stderr)
                assert p.stderr.strip() == "owl: this Owl daemon belongs to another user"
                assert p.stdout == (
                    ""
                    if "--json" not in args
                    else json.dumps(
                        {"error": "this Owl daemon belongs to another user", "exit": 1}, indent=2
                    )
                    + "\n"
                )  # with --json the error is an object on stdout
            st = d.status()
            assert st["queue"] == [] and st["paused"] is False
            assert "refused a connection from uid %d" % stranger.pw_uid in d.log_text()
            # and the owner is still served
            path.parent.chmod(0o700)
            path.chmod(0o600)
            assert d.add("sleep=60", project) >= 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def _full_listener(path: Path) -> tuple[socket.socket, list[socket.socket]]:
    """A Unix socket that listens but does not accept, its queue filled to the brim."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    queued: list[socket.socket] = []
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(str(path))
        except BlockingIOError:
            c.close()
            return server, queued
        queued.append(c)


def test_a_full_listen_queue_is_waited_out_not_an_error(tmp_path):
    from owl.control import client

    path = tmp_path / "full.sock"
    server, queued = _full_listener(path)
    answered = threading.Event()

    def serve() -> None:
        # drain the queue a moment later, then answer the request that waited
        time.sleep(0.3)
        server.settimeout(5)
        conns = [server.accept()[0] for _ in range(len(queued) + 1)]
        for conn in conns:
            conn.settimeout(0.2)
            try:
                if conn.recv(4096):
                    answered.set()  # before the answer: the command may read it at once
                    conn.sendall(protocol.ok({"machine": "idle"}))
            except OSError:
                pass
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert client.ask(path, "status", timeout=10) == {"machine": "idle"}
        assert answered.is_set()
    finally:
        t.join(5)
        for c in queued:
            c.close()
        server.close()


def test_a_queue_that_stays_full_is_one_line_within_the_timeout(tmp_path):
    from owl.control import client

    path = tmp_path / "full.sock"
    server, queued = _full_listener(path)
    t0 = time.monotonic()
    try:
        with pytest.raises(client.DaemonError, match="did not take the connection within 0.5 s"):
            client.ask(path, "status", timeout=0.5)
    finally:
        for c in queued:
            c.close()
        server.close()
    assert time.monotonic() - t0 < 2.0
