"""How many open handles (pidfds) the daemon keeps between signals, and a spare
file descriptor for the moment it runs out.

Why a budget: a member signalled through a pidfd it keeps is signalled in a
microsecond at the next freeze, which is what keeps a freeze of the usual Run
(tens to a few hundred processes) within its milliseconds. But a pidfd per
member is a file descriptor per member: a desktop session's soft limit is
1,024, so a Run of a thousand processes (a parallel build, a test farm, an
agent looping on a bug) once made every open past the limit fail (EMFILE),
and those members were silently never stopped. So the daemon keeps at most
``BUDGET`` pidfds in all, whatever the number or the size of its Runs; a
member past the budget is opened, checked, signalled and closed each time
(about 10 us more per signal), and the daemon's open files stay flat as a
Run grows.

Rejected: raising the soft limit to the hard one at start. It moves the
fault from 1,024 to 4,096 or 524,288 members rather than removing it, and
every process a Run starts would inherit the raised limit (programs that
still use ``select()`` break past 1,024).

Why a spare descriptor: where the process is out of descriptors for another
reason (a burst of git calls, a leak), even the open-check-close path needs
one. ``spare()`` frees the one kept for this, for one call, and takes it back
after: the classic reserve-descriptor trick. A signal that still cannot be
sent is retried by the freeze and, failing that, named (see untouchable.py).
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


def _budget() -> int:
    """A quarter of the soft open-file limit, between 64 and 512: room for
    the usual Run's every process, and three quarters left to the rest."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY:
        return 512
    return max(64, min(512, soft // 4))


BUDGET = _budget()

_lock = threading.Lock()
_held = 0
_spare: int | None = None


def take() -> bool:
    """Count one more kept handle, if the budget allows; False: use it once
    and close it."""
    global _held
    with _lock:
        if _held >= BUDGET:
            return False
        _held += 1
        return True


def give_back() -> None:
    """A kept handle was closed."""
    global _held
    with _lock:
        _held = max(0, _held - 1)


def held() -> int:
    """How many handles are kept now (for the tests and the bench)."""
    with _lock:
        return _held


def _keep_spare() -> None:
    global _spare
    if _spare is None:
        try:
            _spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            _spare = None


@contextmanager
def _spare_freed() -> Iterator[None]:
    global _spare
    with _lock:
        if _spare is not None:
            os.close(_spare)
            _spare = None
        try:
            yield
        finally:
            _keep_spare()


def spare(call: Callable[[], T]) -> T:
    """``call()``; if it runs out of file descriptors (EMFILE, ENFILE), once
    more with the spare descriptor freed for it."""
    try:
        return call()
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
    with _spare_freed():
        return call()


_keep_spare()
