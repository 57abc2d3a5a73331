"""A person at an X11 desktop, for tests: the pointer moves every `every`
seconds for as long as they are there, then stops.

Why a process of its own that moves the pointer through XTEST on one open
connection (`pointer_hand.py`), and not an `xdotool` started from the test's
process for each move: whether the person is there is what the test is
about, so they must be there without a gap. Moves made by starting xdotool
from a busy test process every 0.2 s were measured absent for 1.08 s once in
7 minutes of the whole suite's load: longer than the harness's `idle.after`
of 1 s. Owl then rightly took the machine as idle and started a Run, the
person came back for longer than the 3 s grace window, the Run was ended
interrupted, and the Job reached review on a second Run (the first with no
checks). Here a move is one request on a connection already open, made at a
higher priority than the load where the test may ask it (a person's hand is
not slowed by the machine's load), and each move's moment comes back, so a
test knows when the person left and can say so, should even this hand be
starved (`longest_gap`), rather than blame Owl for it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from owlproc import wait_for

HAND = Path(__file__).with_name("pointer_hand.py")


class Person:
    """`with Person(env) as p:` they are at the machine; `p.leave()` (or the
    block's end) and they are gone. `p.last` is the moment of their last move."""

    def __init__(
        self, env: dict, every: float = 0.1, xs: tuple[int, int] = (100, 150), y: int = 100
    ) -> None:
        # two places, never the one the pointer is at (a move there is no input)
        self._argv = [sys.executable, str(HAND), str(every), str(xs[0]), str(xs[1]), str(y)]
        self._env = env
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.moments: list[float] = []
        self.left_at: float | None = None

    @property
    def moves(self) -> int:
        return len(self.moments)

    @property
    def last(self) -> float:
        """time.monotonic() of the last move the X server has had (0 before any)."""
        return self.moments[-1] if self.moments else 0.0

    def longest_gap(self) -> float:
        """The longest the person was still while there, in seconds."""
        m = list(self.moments)
        return max((b - a for a, b in zip(m, m[1:])), default=0.0)

    def _read(self, out: object) -> None:
        for line in out:  # type: ignore[attr-defined]
            self.moments.append(float(line))

    def __enter__(self) -> Person:
        self._proc = subprocess.Popen(
            self._argv,
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True)
        self._reader.start()
        wait_for(
            lambda: self.moves > 0 or self._proc.poll() is not None,  # type: ignore[union-attr]
            what="the person's first move",
        )
        if not self.moves:
            raise RuntimeError(f"the person's hand failed: {self._proc.stderr.read()}")  # type: ignore[union-attr]
        return self

    def leave(self) -> float:
        """They go: no move after this returns. The moment of their last move."""
        proc = self._proc
        if proc is not None and self.left_at is None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(10)
            assert self._reader is not None
            self._reader.join(10)
            self.left_at = time.monotonic()
        return self.last

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None and self.left_at is None:
            self.leave()
