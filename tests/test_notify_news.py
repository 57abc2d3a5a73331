"""What else reaches the person away, end to end through the real daemon and the
real Apprise library to a local receiver: an agent waiting on a usage limit
longer than `notify.limit_after`, and a full disk (on a real, small tmpfs).
Neither repeats the agent's raw words. (A process Owl may not signal, whose
command line is the agent's to write: tests/test_untouchable.py.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from owl.notify.route import TEXT_MAX
from owl.rules import timefmt
from owlproc import ROOT, OwlDaemon, make_project, wait_for
from support.notify_servers import Receiver
from support.smalldisk import fill, small_disk_fixture

SPILL = str(ROOT / "tests" / "agents" / "spill.py")
small_disk = small_disk_fixture("24m")

# Says its usage limit was hit and when it resets (argv[1]), with hostile bytes
# and a long tail around the words, and exits 1.
LIMITED = (
    "import sys\n"
    "print('\\x1b[31mYou have hit your usage limit\\x07; try again in ' + sys.argv[1]"
    " + ' ' + 'z' * 5000)\n"
    "raise SystemExit(1)\n"
)


def limited(span: str) -> dict:
    return {"command": [sys.executable, "-c", LIMITED, span], "limit_pattern": "usage limit"}


def test_a_long_usage_limit_wait_is_told_a_short_one_is_not(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    cfg = {
        "agents": {"soon": limited("5 minutes"), "weekly": limited("7 days")},
        "notify": {"batch": "0s", "limit_after": "10m"},
    }
    with Receiver() as rx:
        cfg["notify"]["away"] = [rx.url()]
        with OwlDaemon(tmp_path / "home", cfg) as d:
            d.machine("idle")
            for agent in ("soon", "weekly"):  # in turn: the notify thread takes them in order
                job = d.add("anything", project, "--agent", agent)
                wait_for(
                    lambda: any(w["agent"] == agent for w in d.status()["limits"]),
                    what=f"{agent}'s wait",
                )
            wait_for(lambda: rx.got, timeout=15, what="the message")
            [w] = [w for w in d.status()["limits"] if w["agent"] == "weekly"]
            d.ok("status")
            assert len(rx.got) == 1, rx.got
            msg = rx.got[0]["body"]
            until = timefmt.ahead(w["until_epoch"], time.time())
            assert msg["title"] == f"Owl: weekly waits until {until}", msg
            assert " " in until  # dated: a week off is not this evening
            # Owl's own words: the agent's line (its bytes, its 5,000 z) is not repeated
            reason = msg["message"].splitlines()[0]
            assert reason.startswith("weekly's usage limit; resets on ") and len(reason) <= TEXT_MAX
            assert "\x1b" not in msg["message"] and "zzz" not in msg["message"]
            assert d.job(job)["state"] == "pending"  # its place kept


def test_a_full_disk_is_told_while_away(tmp_path: Path, small_disk: Path) -> None:
    project = make_project(tmp_path / "proj")
    go = tmp_path / "go"
    with Receiver() as rx:
        d = OwlDaemon(
            small_disk / "home",
            {
                "agents": {"spill": {"command": [sys.executable, SPILL, "0", str(go), "0"]}},
                "agent": {"default": "spill"},
                "notify": {"away": [rx.url()], "batch": "0s"},
                "runs": {"disk_floor": "off"},  # a full disk's path, not the floor's
            },
        )
        d.keep_pids_in(tmp_path)  # off the small disk
        d.log = tmp_path / "daemon.log"
        with d:
            job = d.add("go", project)
            d.machine("idle")
            d.wait_run(job, "running")
            fill(small_disk)
            (d.home / ".owl-room").unlink()  # the kept-back room already spent
            fill(small_disk, "filler2")
            go.touch()  # the Run ends; its end cannot be written
            wait_for(lambda: rx.got, timeout=20, what="the message")
            [msg] = [g["body"] for g in rx.got]
            assert msg["title"] == "Owl: The disk is full", msg
            assert "owl.db" in msg["message"] and "when there is room" in msg["message"]


def test_a_job_kept_waiting_by_a_full_disk_is_told_once_while_away(
    tmp_path: Path, small_disk: Path
) -> None:
    project = make_project(tmp_path / "proj")
    with Receiver() as rx:
        d = OwlDaemon(
            small_disk / "home",
            {"notify": {"away": [rx.url()], "batch": "0s"}, "runs": {"disk_floor": "off"}},
        )
        d.keep_pids_in(tmp_path)  # off the small disk
        d.log = tmp_path / "daemon.log"
        with d:
            job = d.add("sleep=1", project)  # queued while in use: it waits
            fill(small_disk)
            (d.home / ".owl-room").unlink()
            fill(small_disk, "filler2")
            d.machine("idle")
            wait_for(lambda: rx.got, timeout=20, what="the message")
            d.machine("input")
            d.machine("idle")  # another look, still full: not told again
            wait_for(lambda: "full" in (d.status().get("waiting") or ""), what="the wait")
            [msg] = [g["body"] for g in rx.got]
            assert msg["title"] == "Owl: The disk is full", msg
            assert "no new Jobs until there is room" in msg["message"]
            assert d.job(job)["state"] == "pending"  # its place kept
