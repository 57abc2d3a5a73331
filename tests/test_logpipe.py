"""The log pipe on its own: real processes writing into a real Sink."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from owl.engine import logpipe
from owlproc import wait_for

WRITE = (
    "import sys\n"
    "n = int(sys.argv[1])\n"
    "line = b'y' * 99 + b'\\n'\n"
    "for i in range(n): sys.stdout.buffer.write(line)\n"
    "sys.stdout.buffer.write(b'last\\n')\n"
)


def _run_into(sink: logpipe.Sink, lines: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", WRITE, str(lines)], stdout=sink.fd, stderr=sink.fd)
    sink.started()
    return p


def test_the_cap_holds_and_rotation_keeps_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    sink = logpipe.Sink(log, cap=100_000)
    p = _run_into(sink, 5_000)  # 500 kB through a 100 kB cap
    assert p.wait(20) == 0
    sink.close()
    assert sink.wait(10)
    data, old = log.read_bytes(), log.with_name("1.log.1").read_bytes()
    assert len(data) <= 100_000 and len(old) <= 100_000
    assert data.endswith(b"last\n") and old.endswith(b"y\n") and old.startswith(b"y")
    assert sink.received == 5_000 * 100 + 5 and sink.dropped == 0


def test_a_slow_disk_does_not_hold_up_the_agent(tmp_path: Path) -> None:
    class SlowDisk(logpipe.Sink):
        def _put_some(self, part):  # a disk that takes 2 s a write
            time.sleep(2.0)
            return super()._put_some(part)

    sink = SlowDisk(tmp_path / "2.log", cap=10 << 20)
    t0 = time.monotonic()
    p = _run_into(sink, 30_000)  # 3 MB, more than a pipe holds
    assert p.wait(20) == 0
    took = time.monotonic() - t0
    assert took < 1.5, took  # it did not wait on the writer
    wait_for(lambda: sink.received == 30_000 * 100 + 5, what="everything read")
    sink.close()
    assert sink.wait(20)
    assert (tmp_path / "2.log").read_bytes().endswith(b"last\n")


def test_a_writer_outside_the_run_is_cut_off_after_close(tmp_path: Path) -> None:
    sink = logpipe.Sink(tmp_path / "3.log", cap=1 << 20)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; print('held', flush=True); time.sleep(30)"],
        stdout=sink.fd,
        stderr=sink.fd,
    )
    sink.started()
    try:
        wait_for(lambda: sink.received > 0, what="the first line")
        t0 = time.monotonic()
        sink.close()  # returns at once
        assert time.monotonic() - t0 < 0.1
        assert sink.wait(logpipe.DRAIN_AFTER_CLOSE + 3)
        assert (tmp_path / "3.log").read_bytes() == b"held\n"
    finally:
        holder.kill()
        holder.wait()


def test_a_pipe_past_fd_1024_is_read(tmp_path: Path) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1200
    if hard != resource.RLIM_INFINITY and hard < want:
        raise AssertionError(f"this test needs {want} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        sink = logpipe.Sink(tmp_path / "4.log", cap=1 << 20)
        assert sink.fd > 1024
        p = _run_into(sink, 10)
        assert p.wait(20) == 0
        sink.close()
        assert sink.wait(10)
        assert (tmp_path / "4.log").read_bytes().endswith(b"last\n")
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_burst_past_what_memory_holds_loses_nothing_on_a_disk_that_takes_it(
    tmp_path: Path,
) -> None:
    """9 MB at once, more than the reader holds in memory, to a disk that takes
    each write in 50 ms: the agent waits on its pipe while the writer gets on,
    and every byte reaches the log (before, the reader outran the writer and
    dropped megabytes, even on a disk with room to spare)."""

    class SteadyDisk(logpipe.Sink):
        def _put_some(self, part):
            time.sleep(0.05)
            return super()._put_some(part)

    log = tmp_path / "5.log"
    sink = SteadyDisk(log, cap=8 << 20)
    p = _run_into(sink, 9 * 1024 * 1024 // 100)
    assert p.wait(60) == 0
    sink.close()
    assert sink.wait(20)
    kept = sum(f.stat().st_size for f in (log, log.with_name(log.name + ".1")) if f.exists())
    assert sink.dropped == 0 and kept == sink.received, (sink.dropped, kept, sink.received)
    assert log.read_bytes().endswith(b"last\n")
