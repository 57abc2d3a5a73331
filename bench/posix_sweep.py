"""What the macOS orphan rule costs a sweep: the portable (posix) backend,
with and without its session/group bookkeeping (posix.Kin), on a
100-process tree spread over 10 sessions.

The posix backend is what macOS uses; Kin reads each live member's session
and process group on every sweep so that an untagged orphan of launchd can
be recognised. Target: it adds no more than 10 % to a sweep.

    python bench/posix_sweep.py [--trials 200] [--sessions 10] [--per 10]
"""

from __future__ import annotations

import statistics
import time
import types


from owl import tree
from owl.tree import posix

# (the bench's folder is on the path: run as python bench/<name>.py)
from figures import sweep_bench


def without_kin() -> types.ModuleType:
    b = types.ModuleType("posix_without_kin")
    b.__dict__.update({k: v for k, v in vars(posix).items() if not k.startswith("__")})
    b.Kin = None
    return b


def timed(run: tree.ProcessTree, trials: int) -> list[float]:
    out = []
    for _ in range(trials):
        t0 = time.perf_counter()
        run.alive()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    with sweep_bench(__doc__.splitlines()[0]) as (args, tag, top):
        # Trials alternate between the two, so load drifts hit both alike.
        runs = {
            label: tree.ProcessTree(("OWL_RUN_ID", tag), top, backend=b)
            for label, b in (("posix without Kin", without_kin()), ("posix with Kin", posix))
        }
        times: dict[str, list[float]] = {label: [] for label in runs}
        for run in runs.values():
            run.alive()
        for _ in range(args.trials):
            for label, run in runs.items():
                times[label] += timed(run, 1)
        medians = {}
        for label, values in times.items():
            ms = sorted(v * 1000 for v in values)
            medians[label] = statistics.median(ms)
            print(
                f"  sweep, {label:<18} median {medians[label]:6.2f} ms   "
                f"p99 {ms[int(0.99 * (len(ms) - 1))]:6.2f} ms"
            )
            runs[label].close()
        extra = medians["posix with Kin"] / medians["posix without Kin"] - 1
        print(f"  Kin adds {extra * 100:+.1f} % to the median sweep (target <= 10 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
