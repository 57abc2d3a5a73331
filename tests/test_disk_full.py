"""A full disk loses no record: the log's cap holds as it is written, rotation
needs no free space, a Run's end keeps the time it ended, and `owl jobs` and
`owl status` agree about what is live. On a real, small ext4 filesystem of its own."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from owl.engine.live import LOG_CAP
from owlproc import ROOT, OwlDaemon, make_project, wait_for
from support.smalldisk import fill, small_disk_fixture

SPILL = str(ROOT / "tests" / "agents" / "spill.py")


small_disk = small_disk_fixture("24m")


def _daemon(home: Path, argv: list[str], tmp_path: Path) -> OwlDaemon:
    d = OwlDaemon(
        home,
        {
            "agents": {"spill": {"command": [sys.executable, SPILL, *argv]}},
            "agent": {"default": "spill"},
            "runs": {"disk_floor": "off"},  # the full disk's own path (the floor's: test_run_caps)
        },
    )
    d.keep_pids_in(tmp_path)  # off the small disk
    d.log = tmp_path / "daemon.log"
    return d


def _started(d: OwlDaemon, project: Path) -> tuple[int, dict]:
    """Add the one Job and let it run: the Job and its live Run."""
    job = d.add("go", project)
    d.machine("idle")
    return job, d.wait_run(job, "running")


def _log_sizes(log: Path) -> tuple[int, int]:
    def size(p: Path) -> int:
        try:
            return p.stat().st_size
        except FileNotFoundError:
            return 0

    return size(log), size(log.with_name(log.name + ".1"))


@pytest.mark.parametrize("small_disk", ["64m"], indirect=True)
def test_the_log_cap_holds_as_the_agent_writes(tmp_path: Path, small_disk: Path) -> None:
    project = make_project(tmp_path / "proj")
    d = _daemon(small_disk / "home", ["30"], tmp_path)  # 30 MB in a second or so
    with d:
        job = d.add("go", project)
        log = d.home / "logs"
        seen: list[tuple[int, int]] = []
        stop = threading.Event()

        def watch() -> None:  # the sizes, as often as they can be read
            while not stop.is_set():
                for f in log.glob("*.log"):
                    seen.append(_log_sizes(f))

        t = threading.Thread(target=watch)
        t.start()
        try:
            d.machine("idle")
            shown = d.wait_job(job, "review", timeout=60)
        finally:
            stop.set()
            t.join()
        run = shown["runs"][0]
        path = Path(run.get("log") or log / f"{run['id']}.log")
        assert seen and max(a for a, _ in seen) <= LOG_CAP and max(b for _, b in seen) <= LOG_CAP
        data = path.read_bytes()
        assert data.endswith(f"the end {run['id']}\n".encode())
        old = path.with_name(path.name + ".1").read_bytes()
        assert len(old) <= LOG_CAP and old.endswith(b"x\n")  # rotated at a line's end
        assert sum(_log_sizes(path)) <= 2 * LOG_CAP


def test_rotation_works_with_no_free_space(tmp_path: Path, small_disk: Path) -> None:
    project = make_project(tmp_path / "proj")
    go = tmp_path / "go"
    d = _daemon(small_disk / "home", ["9", str(go), "9"], tmp_path)
    with d:
        job, run = _started(d, project)
        path = Path(run["log"])
        wait_for(
            lambda: sum(_log_sizes(path)) >= 9 * 1024 * 1024,
            timeout=90,
            what="the first 9 MB written and rotated once",
        )
        assert _log_sizes(path)[1] > 0
        filler = fill(small_disk)
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        assert free < 64 * 1024, free
        go.touch()
        shown = d.wait_job(job, "review", timeout=60)
        assert shown["runs"][0]["outcome"] == "succeeded"
        # the newest output reached the log although the disk was full
        data = path.read_bytes()
        assert data.endswith(f"the end {run['id']}\n".encode()), data[-200:]
        assert len(data) <= LOG_CAP
        assert filler.exists()


def test_a_runs_end_keeps_its_time_and_jobs_and_status_agree(
    tmp_path: Path, small_disk: Path
) -> None:
    project = make_project(tmp_path / "proj")
    go = tmp_path / "go"
    d = _daemon(small_disk / "home", ["0", str(go), "0"], tmp_path)
    with d:
        job, run = _started(d, project)
        filler = fill(small_disk)
        (d.home / ".owl-room").unlink()  # the kept-back room already spent
        filler2 = fill(small_disk, "filler2")
        go.touch()
        # the Run ends; its end cannot be written yet
        try:
            status = wait_for(
                lambda: (s := d.status()) and any(r.get("unrecorded") for r in s["runs"]) and s,
                timeout=60,
                what="the Run to end unrecorded",
            )
        except AssertionError as e:  # what the daemon saw, for the one who reads the failure
            free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
            log = d.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{e}; {free} bytes free; job {d.job(job)}; log:\n{log}") from None
        ended = time.time()
        [r] = [r for r in status["runs"] if r["job_id"] == job]
        assert r["state"] == "ending" and "disk is full" in status["attention"]
        for _ in range(10):  # while it waits, the two agree
            live_in_status = {r["job_id"] for r in d.status()["runs"]}
            active_in_jobs = {j["id"] for j in d.json("jobs", "list") if j["state"] == "active"}
            assert live_in_status == active_in_jobs == {job}
            time.sleep(0.2)
        assert "ending" in d.ok("status")
        [shown_run] = d.job(job)["runs"]
        assert shown_run["state"] == "ending" and shown_run["unrecorded"]
        assert shown_run["ended_at"] == r["ended_at"]
        filler.unlink()
        filler2.unlink()
        shown = wait_for(
            lambda: not (j := d.job(job))["runs"][0].get("unrecorded") and j,
            timeout=15,
            what="the end to be written",
        )
        assert shown["state"] == "review" and shown["runs"][0]["outcome"] == "succeeded"
        from datetime import datetime

        at = datetime.fromisoformat(shown["runs"][0]["ended_at"]).timestamp()
        assert at <= ended + 0.5 < time.time() - 1.5, (at, ended)
        assert {r["job_id"] for r in d.status()["runs"]} == set()
        wait_for(
            lambda: (d.home / ".owl-room").exists(), timeout=10, what="the room kept back again"
        )
