"""What carrying a Run's output through Owl costs: a real agent process floods
a real Sink, and the figures are the throughput, the CPU the daemon's two
threads spend per megabyte, the largest the log ever got (it must stay at the
cap), and how long the agent took compared with writing to a file itself.

Target: the agent takes at most 1.3 times as long as when it writes to a file
itself (Owl is not what slows it), and the log never gets past its cap.

    python bench/logpipe.py [--mb 200] [--cap-mb 8]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))

from owl.engine import logpipe  # noqa: E402

FLOOD = (
    "import sys\n"
    "line = b'x' * 1023 + b'\\n'\n"
    "out = sys.stdout.buffer\n"
    "for _ in range(int(sys.argv[1]) * 1024): out.write(line)\n"
)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def through_sink(folder: Path, mb: int, cap: int) -> dict[str, float]:
    log = folder / "1.log"
    biggest = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                biggest[0] = max(biggest[0], log.stat().st_size)
            except FileNotFoundError:
                pass
            time.sleep(0.001)

    w = threading.Thread(target=watch)
    w.start()
    cpu0, t0 = _cpu(), time.monotonic()
    sink = logpipe.Sink(log, cap)
    p = subprocess.Popen([sys.executable, "-c", FLOOD, str(mb)], stdout=sink.fd, stderr=sink.fd)
    sink.started()
    p.wait()
    agent_s = time.monotonic() - t0
    sink.close()
    sink.wait(60)
    total_s = time.monotonic() - t0
    stop.set()
    w.join()
    cpu = _cpu() - cpu0
    return {
        "agent_s": agent_s,
        "total_s": total_s,
        "mb_per_s": mb / total_s,
        "cpu_ms_per_mb": 1000 * cpu / mb,
        "biggest": biggest[0],
    }


def to_file(folder: Path, mb: int) -> float:
    t0 = time.monotonic()
    with open(folder / "direct.log", "wb") as f:
        subprocess.run([sys.executable, "-c", FLOOD, str(mb)], stdout=f, check=True)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--cap-mb", type=int, default=8)
    a = ap.parse_args()
    cap = a.cap_mb << 20
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        direct = to_file(folder, a.mb)
        os.unlink(folder / "direct.log")
        r = through_sink(folder, a.mb, cap)
    print(
        f"{a.mb} MB through the pipe: {r['total_s']:.2f} s ({r['mb_per_s']:.0f} MB/s); "
        f"the agent itself took {r['agent_s']:.2f} s, {direct:.2f} s writing to a file"
    )
    print(f"Owl's threads: {r['cpu_ms_per_mb']:.2f} ms of CPU per MB")
    print(f"largest the log got: {r['biggest']:,} bytes (cap {cap:,})")
    ok = r["agent_s"] <= 1.3 * direct and r["biggest"] <= cap
    print(
        "target met"
        if ok
        else "TARGET MISSED: at most 1.3x the agent's own time to a file, and never past the cap"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
