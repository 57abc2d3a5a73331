"""A Run's log as its end is read: the lines written since an offset, the
head and tail of a long one, never more than a bound whatever the agent wrote.

Its own module because the engine reads logs of every agent (a session id
as it shows, a sandbox's set-up words, a check's first lines) and a driver
reads its agent's: neither should reach into the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path

HEAD = 256 * 1024  # an agent's first events (claude's init) are within the first lines
TAIL = 2 * 1024 * 1024  # its last (a limit, the result) are at the end


def read_span(path: Path, offset: int = 0) -> list[str]:
    """The lines written to `path` from `offset` on: its head and tail when it is long.

    A log rotated since `offset` (smaller than it now) is read from its start."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = offset if 0 <= offset <= size else 0
            f.seek(start)
            if size - start <= HEAD + TAIL:
                data = f.read()
            else:
                head = f.read(HEAD)
                f.seek(size - TAIL)
                tail = f.read()
                data = head[: head.rfind(b"\n") + 1] + tail[tail.find(b"\n") + 1 :]
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()


def read_head(path: Path, offset: int = 0, limit: int = 64 * 1024) -> list[str]:
    """The first whole lines written to `path` from `offset` on (at most `limit` bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, offset))
            data = f.read(limit)
    except OSError:
        return []
    return data[: data.rfind(b"\n") + 1].decode("utf-8", "replace").splitlines()
