"""A unix socket server bound at a path by a process in a network namespace
of its own (``unshare -n``; ``unshare -rn`` for a user who is not root), as a
container's or a rootless podman's is: the host's ``/proc/net/unix`` does not
list it, yet a ``connect()`` to its path from anywhere answers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from support.need import programs

SERVER = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
s.listen(8)
print("ready", flush=True)
while True:
    conn, _ = s.accept()
    with conn:
        conn.sendall(b"hello")
"""


# With a volume: the host's folder mounted at another path, in a mount
# namespace of the server's own, before the server starts.
MOUNTED = 'mount --bind "$1" "$2" && exec "$3" -I -c "$4" "$5"'


@contextlib.contextmanager
def in_own_netns(path: str, volume: tuple[str, str] | None = None) -> Iterator[int]:
    """Serve ``path`` from a process of a network namespace of its own (its
    pid); the socket answers whoever connects with ``hello``. ``volume``: (the
    host's folder, where the server sees it), as a container's volume is, the
    server's mounts its own; ``path`` is then the server's."""
    programs("unshare")
    unshare = ["unshare", "-n"] if os.getuid() == 0 else ["unshare", "-rn"]
    serve = [sys.executable, "-I", "-c", SERVER, path]
    if volume is not None:
        unshare += ["-m", "--propagation", "private"]
        serve = ["sh", "-c", MOUNTED, "sh", *volume, sys.executable, SERVER, path]
    proc = subprocess.Popen(
        [*unshare, *serve],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline()  # "ready" once bound, or nothing when it failed
        assert said.strip() == "ready", (said, proc.stderr.read() if proc.stderr else "")
        assert os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path if volume is None else path.replace(volume[1], volume[0], 1))
