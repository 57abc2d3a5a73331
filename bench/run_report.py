"""What reading a claude Run's end costs, and that the engine thread never pays it.

The driver's report (session id, usage limit, service error, usage, final
message) is read from the Run's log by the thread that waited for the
agent's exit, before it tells the engine. This measures that read for a
small log (a Run that met its limit at once), a typical one, and one at the
rotation cap (8 MB, read by its head and tail), from captured real CLI
output; and the engine thread's share of a Run's end, which is a dict
lookup and the rule (`jobrules.judge`), with no file read at all.

Targets: the report of an 8 MB log within 100 ms on an unloaded machine (it
delays only the Run's own end, never the engine); the rule within 50 µs.

    python bench/run_report.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))

from owl.agents.claude_stream import read_report, read_span  # noqa: E402
from owl.rules.jobrules import Report, judge  # noqa: E402

STREAMS = ROOT / "tests" / "support" / "streams"


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    limit = (STREAMS / "usage_limit.jsonl").read_text().splitlines()
    ok = (STREAMS / "success.jsonl").read_text().splitlines()
    filler = (
        '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash",'
        '"input":{"command":"pytest -q"}}]}}\n{"type":"user","message":{"content":'
        '[{"type":"tool_result","content":"' + "." * 400 + '"}]}}'
    )
    with tempfile.TemporaryDirectory() as tmp:
        logs = {}
        for name, lines in (
            ("limit at once", limit),
            ("typical (2 MB)", None),
            ("at the cap (8 MB)", None),
        ):
            path = Path(tmp, name.split()[0] + ".log")
            if lines is None:
                size = 2 if "2 MB" in name else 8
                n = size * 1024 * 1024 // (len(filler) + 1)
                lines = [ok[0]] + [filler] * n + ok[1:]
            path.write_text("\n".join(lines) + "\n")
            logs[name] = path
        worst = 0.0
        for name, path in logs.items():
            t = timed(lambda: read_report(read_span(path), now=time.time()), a.repeat)
            worst = max(worst, t)
            print(f"report, {name:<18} {path.stat().st_size / 1e6:6.2f} MB  {t * 1e3:7.2f} ms")
        rep = Report(limit="five_hour", resets_at=time.time() + 3600)
        rule = timed(
            lambda: judge(
                agent="claude",
                outcome="failed",
                ended_by="exit",
                exit_code=1,
                reason="x",
                report=rep,
                strikes=0,
                now=time.time(),
            ),
            a.repeat * 50,
        )
        print(f"rule (engine thread)                   {rule * 1e6:7.2f} µs")
    ok_all = worst <= 0.100 and rule <= 50e-6
    print("targets met" if ok_all else "TARGETS MISSED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
