"""A file read as data: a regular file only, opened so nothing in its place holds the reader.

Owl reads files that are not its own to trust: the config, an agent's
settings, a credential the person keeps for it. A FIFO in one's place would
block a read for ever, a device would never end, and a check made before the
open can be raced (the file swapped between the look and the open). So a
file is opened non-blocking (a FIFO opens at once and is then refused),
taking no controlling terminal, and its kind is checked on the open
descriptor itself. Apart from its readers because the hazard is the same for
each; what each does with what it reads (and with a refusal) is its own.
"""

from __future__ import annotations

import contextlib
import os
import stat

# Not typing.TYPE_CHECKING: the CLI reads its config through here, and
# importing typing costs each `owl` call ~2 ms.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Iterator

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class NotRegular(ValueError):
    """The path names something other than a regular file (``kind`` says what)."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        self.kind = kind(mode)
        super().__init__(f"{os.fspath(path)}: is {self.kind}, not a regular file")


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words for a message."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def opened(
    path: str | os.PathLike[str], *, follow: bool = True
) -> Iterator[tuple[int, os.stat_result]]:
    """``path`` open for reading, as its descriptor and that descriptor's stat;
    closed on leaving. ``follow=False``: a link in its place is refused
    (OSError, ELOOP). Raises OSError as ``os.open`` does (FileNotFoundError
    for a missing file), NotRegular for anything but a regular file."""
    fd = os.open(path, _OPEN if follow else _OPEN | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, st.st_mode)
        yield fd, st
    finally:
        os.close(fd)


def read_bounded(path: str, limit: int, *, follow: bool = True) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes; None for any
    other (missing, unreadable, larger, not a regular file, a link where
    ``follow`` is False): for files whose absence or damage only means that
    they say nothing."""
    try:
        with opened(path, follow=follow) as (fd, st):
            if st.st_size > limit:
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read(limit)
    except (OSError, NotRegular):
        return None
