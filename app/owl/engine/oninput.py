"""The first moments of the person's return: the stop that does not wait for
the engine's thread, and how a freeze on input spent its time.

The thread that hears input (an idle backend's) stops the processes of the
Runs the core would freeze (its standing order, `standing`, renewed by the
engine after every round of events) before it hands the input over: the hop
to the engine's thread then costs the person nothing, however busy that
thread or the interpreter is at that moment. The engine still decides: the
core's `input` freezes as ever, and a tree stopped for a Run that the core
did not freeze (its Shift began meanwhile, it ended) is continued again
(`undo`), so nothing is left stopped that the core did not decide.

For the log line: the moments are monotonic (CLOCK_MONOTONIC, the same clock as another
process's `time.perf_counter()` on Linux), so a bench that sent the input
can line the daemon's moments up with its own: from the input sent to the
hook hearing it (the X server, the compositor), to the engine thread taking
it (the hop), to the tree's known processes signalled, to the freeze done
(the sweep for new ones, and the kernel stopping each process).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from owl.rules import lifecycle

if TYPE_CHECKING:
    from owl.engine.live import Live
    from owl.tree import ProcessTree

Order = tuple[tuple[int, "ProcessTree"], ...]


def standing(core: lifecycle.Core, live: Mapping[int, Live]) -> Order:
    """(run id, tree) of each live Run an input would freeze now."""
    return tuple((i, live[i].tree) for i in core.freezes_on_input() if i in live)


def stop_first(order: Order) -> Order:
    """On the hearing thread: SIGSTOP each tree's known processes; the ones stopped."""
    return tuple((i, t) for i, t in order if t.stop_known())


def undo(core: lifecycle.Core, stopped: Order) -> None:
    """On the engine's thread, after the core decided: continue each tree
    stopped first whose Run the core did not freeze."""
    for run_id, tree in stopped:
        r = core.runs.get(run_id)
        if r is None or r.phase is not lifecycle.Phase.FROZEN:
            tree.thaw()


@dataclass(frozen=True)
class Heard:
    """An input that armed a freeze: when the hook heard it, when the engine took it."""

    heard: float
    taken: float

    def describe(self, first: float | None, signalled: float | None, done: float) -> str:
        """`: input heard at T, stopped first +a ms, taken +b ms, signalled +c ms,
        frozen +d ms` (`first`: the hearing thread's stop, if it made one)."""

        def ms(t: float | None) -> str:
            return "-" if t is None or t < self.heard else f"{(t - self.heard) * 1000:.2f}"

        return (
            f": input heard at {self.heard:.6f}, stopped first +{ms(first)} ms, "
            f"taken +{ms(self.taken)} ms, signalled +{ms(signalled)} ms, frozen +{ms(done)} ms"
        )
