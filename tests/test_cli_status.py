"""`owl status` is one screen of facts: no line repeats or contradicts another,
keep-awake's trouble is a few words, and the Jobs that wait for the person are
listed with the command that helps each."""

from __future__ import annotations

import os
from pathlib import Path

from owlproc import OwlDaemon, make_project

FAILING = "[[checks]]\nname = 'unit'\nrun = 'exit 1'\n"


def test_jobs_that_need_you_come_with_the_command_that_helps(tmp_path: Path) -> None:
    plain = make_project(tmp_path / "plain")
    checked = make_project(tmp_path / "checked", {".owl.toml": FAILING, "README": "x\n"})
    with OwlDaemon(tmp_path / "home") as d:
        review = d.add("write=a.txt commit=a exit=0", plain)
        exhausted = d.add("exit=1", plain, "--attempts", "1")
        blocked = d.add("write=b.txt commit=b exit=0", checked, "--attempts", "1")
        d.machine("idle")
        d.wait_job(review, "review")
        d.wait_job(exhausted, "exhausted")
        d.wait_job(blocked, "blocked")
        lines = d.ok("status").splitlines()
        assert [ln for ln in lines if ln.startswith("review:")] == [
            f"review:     job {review} · write=a.txt commit=a exit=0 · on owl/job-{review} · "
            f"owl jobs review {review}, then owl jobs accept {review}"
        ]
        [ex] = [ln for ln in lines if ln.startswith("exhausted:")]
        assert ex.startswith(f"exhausted:  job {exhausted} · exit=1") and ex.endswith(
            f"· owl jobs extend {exhausted}"
        )
        [bl] = [ln for ln in lines if ln.startswith("blocked:")]
        assert bl.startswith(f"blocked:    job {blocked} · ") and "check unit failed" in bl
        assert bl.endswith(f"owl jobs show {blocked}, then owl jobs extend {blocked}")
        labels = [ln.split(":", 1)[0] for ln in lines if not ln.startswith(" ")]
        assert len(lines) < 25
        assert labels.count("machine") == 1 and labels.count("queue") == 1

        d.machine("battery")
        machine = next(ln for ln in d.ok("status").splitlines() if ln.startswith("machine:"))
        assert machine.count("on battery") == 1, machine


def test_a_shift_on_a_machine_that_cannot_be_read_says_so_once(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")
    }
    d = OwlDaemon(tmp_path / "home", manual=False, env=env)
    d.env.pop("OWL_MACHINE", None)
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        d.env.pop(key, None)
    with d:
        text = d.ok("status")
        assert "machine:    input cannot be read" in text
        assert "note:" not in text  # the machine line already says it
        d.ok("shift", "start", "--for", "30m")
        text = d.ok("status")
        machine = next(ln for ln in text.splitlines() if ln.startswith("machine:"))
        assert "(a Shift is on: not needed)" in machine and "idle in" not in machine
        assert "shift:      on · 30m left" in text
        assert "cannot be read" not in text.replace(machine, "")


def test_a_freeze_that_left_processes_running_is_not_called_frozen() -> None:
    from owl.cli.status import _status_text

    stuck = [
        {
            "pid": 100 + i,
            "command": "sleep 600",
            "why": "Owl could not signal it: Too many open files",
        }
        for i in range(7)
    ]
    st = {
        "machine": {
            "idle": False,
            "idle_for_s": 0,
            "on_ac_power": True,
            "reason": "in use",
            "detectors": ["manual"],
        },
        "paused": False,
        "shift": None,
        "runs": [
            {
                "id": 3,
                "job_id": 2,
                "state": "freezing",
                "frozen_by": "machine",
                "grace_left_s": 880.0,
                "running_for_s": 61.0,
                "title": "build it",
                "not_stopped": stuck,
            }
        ],
        "queue": [],
    }
    text = _status_text(st)
    [line] = [ln for ln in text.splitlines() if ln.startswith("run 3:")]
    assert "NOT frozen: 7 processes still running, Owl keeps trying" in line
    assert "frozen by" not in line
    named = [ln for ln in text.splitlines() if "still running: pid" in ln]
    assert len(named) == 5 and "Too many open files" in named[0]
    assert any(ln.strip() == "and 2 more" for ln in text.splitlines())


def test_status_says_in_its_first_lines_whether_runs_are_contained() -> None:
    from owl.cli.status import _status_text

    def st(sandbox: dict) -> dict:
        return {
            "machine": {
                "idle": True,
                "idle_for_s": 700,
                "on_ac_power": True,
                "reason": None,
                "detectors": ["manual"],
            },
            "paused": False,
            "shift": None,
            "runs": [],
            "queue": [],
            "sandbox": sandbox,
        }

    contained = {"mode": "required", "contained": True, "problem": None, "waits": False}
    first = _status_text(st(contained)).splitlines()[0]
    assert first.startswith("sandbox:") and "Runs are contained" in first
    waits = dict(contained, contained=False, problem="no bwrap", waits=True, line="Jobs wait: x")
    assert _status_text(st(waits)).splitlines()[0] == "sandbox:    Jobs wait: x"
    off = {"mode": "off", "contained": False, "problem": None, "waits": False}
    assert any("not contained" in ln for ln in _status_text(st(off)).splitlines())


def test_a_live_runs_line_says_when_it_has_no_network() -> None:
    """Under "Runs are contained", a Run whose network helper failed says so
    on its own line, with why; one with its own network adds nothing."""
    from owl.cli.status import _status_text

    def line(label: str) -> str:
        st = {
            "machine": {
                "idle": True,
                "idle_for_s": 700,
                "on_ac_power": True,
                "reason": None,
                "detectors": ["manual"],
            },
            "paused": False,
            "shift": None,
            "runs": [
                {
                    "id": 3,
                    "job_id": 2,
                    "state": "running",
                    "frozen_by": None,
                    "grace_left_s": None,
                    "running_for_s": 61.0,
                    "title": "build it",
                    "contained": label,
                }
            ],
            "queue": [],
        }
        [out] = [ln for ln in _status_text(st).splitlines() if ln.startswith("run 3:")]
        return out

    lost = "contained: bwrap 0.8, no network: pasta: Failed to open tun socket in namespace"
    assert " · no network: pasta: Failed to open tun socket in namespace · " in line(lost)
    assert "network" not in line("contained: bwrap 0.8, own network")
    assert " · not contained · " in line("not contained: no bwrap")
    allow = "contained: bwrap 0.8, network: allow-list (18 hosts); unix sockets: own and /x.sock"
    assert " · network: allow-list (18 hosts) · unix sockets: own and /x.sock · " in line(allow)
    assert "unix" not in line("contained: bwrap 0.8, own network; unix sockets: none")
    assert " in namespace · unix sockets: own · " in line(f"{lost}; unix sockets: own")
    assert " · no network · " in line("contained: bwrap 0.8, no network")
