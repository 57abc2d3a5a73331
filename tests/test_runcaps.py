"""The caps' rules: how they are written in the config, the reasons they give,
and what the lifecycle does with a Run over one (pure: no processes here; the
real Runs held to each cap are tests/test_run_caps.py)."""

from __future__ import annotations

import pytest

from owl.notify import events as ev
from owl.notify.route import item_for
from owl.rules import lifecycle as lc
from owl.rules import capwords, runcaps
from owl.settings import config as configmod
from owl.tray.notices import Notices

G = 1024**3
M = 1024**2


@pytest.mark.parametrize(
    ("value", "size", "share"),
    [
        ("8G", 8 * G, None),
        ("512M", 512 * M, None),
        ("1.5GiB", int(1.5 * G), None),
        ("300 MB", 300 * M, None),
        (300 * M, 300 * M, None),
        ("50%", None, 0.5),
        ("12.5%", None, 0.125),
        ("off", None, None),
    ],
)
def test_a_cap_is_a_size_a_share_or_off(
    value: object, size: int | None, share: float | None
) -> None:
    a = runcaps.amount(value)
    assert (a.size, a.share) == (size, share)
    assert a.of(16 * G) == (
        size if size is not None else None if share is None else int(16 * G * share)
    )


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("memory", "10M", "must be at least 64M"),
        ("memory", "lots", 'must be a size such as "8G"'),
        ("memory", "150%", "at most 100%"),
        ("memory", True, 'must be a size such as "8G"'),
        ("processes", 5, "must be 0 (no cap) or from 16"),
        ("processes", "many", "must be a whole number"),
        ("disk_floor", "95%", "at most 90% of the disk"),
        ("disk_floor", "-1G", 'must be a size such as "8G"'),
    ],
)
def test_a_bad_cap_is_refused_in_one_line_naming_file_key_and_value(
    key: str, value: object, said: str
) -> None:
    with pytest.raises(configmod.ConfigError) as e:
        configmod.from_dict({"runs": {key: value}}, "/home/you/.config/owl/config.toml")
    line = str(e.value)
    assert "\n" not in line and line.startswith("/home/you/.config/owl/config.toml: runs.")
    assert f"runs.{key} = " in line and said in line, line


def test_owl_config_show_gives_the_caps_as_written() -> None:
    cfg = configmod.from_dict({"runs": {"memory": "8G", "processes": 0, "disk_floor": "5%"}})
    shown = configmod.effective_document(cfg)["runs"]
    assert (shown["memory"], shown["processes"], shown["disk_floor"]) == ("8G", 0, "5%")
    fresh = configmod.effective_document(configmod.Config())["runs"]
    assert (fresh["memory"], fresh["processes"], fresh["disk_floor"]) == ("50%", 4096, "2G")


def test_the_reasons_name_the_cap_and_the_figure() -> None:
    assert runcaps.memory_over(300 * M, 300 * M, "300M") is None
    over = runcaps.memory_over(int(8.1 * G), 8 * G, "8G")
    assert over == "stopped: used 8.1 GiB of memory, over runs.memory = 8G"
    assert runcaps.processes_over(63, 64) is None
    assert runcaps.processes_over(64, 64) == "stopped: started 64 processes, at runs.processes = 64"
    low = runcaps.disk_under(1 * G, 2 * G, "2G", "/home/you")
    assert low == "stopped: 1.0 GiB free on the disk holding /home/you, under runs.disk_floor = 2G"
    for reason in (over, low, runcaps.forks_refused(64), runcaps.memory_killed(G, "1G")):
        assert capwords.is_cap_stop(reason)
    assert not capwords.is_cap_stop("stopped by the user")
    words = runcaps.block_words(over, 7)
    assert "raise runs.memory" in words and "owl jobs extend 7" in words


# ------------------------------------------------------------ the lifecycle


def core(now: float = 0.0) -> lc.Core:
    c = lc.Core(timing=lc.Timing(grace=60.0))
    c.idle(now)
    c.started(1, now)
    return c


def test_a_run_over_a_cap_is_frozen_then_ended_interrupted() -> None:
    c = core()
    reason = runcaps.processes_over(64, 64) or ""
    assert c.over(1, 1.0, reason) == [lc.Freeze(1), lc.Term(1)]
    assert c.over(1, 1.5, reason) == []  # once
    assert c.tick(6.0) == [lc.Kill(1)]  # 5 s after the Term, as a window's end
    [finish] = c.gone(1, 6.5)
    assert finish == lc.Finish(1, lc.Outcome.INTERRUPTED, lc.EndedBy.SIGKILL, reason, None)


def test_a_frozen_run_over_a_cap_is_ended_without_a_second_freeze() -> None:
    c = core()
    c.input(1.0)
    assert c.over(1, 2.0, "stopped: x runs.memory = 1G") == [lc.Term(1)]


def test_the_disk_floor_holds_a_run_until_room_returns() -> None:
    c = core()
    low = runcaps.disk_under(M, 2 * G, "2G", "/w") or ""
    assert c.floor(1, 1.0, low) == [lc.Freeze(1)]
    assert c.runs[1].frozen_by == lc.DISK
    assert c.idle(2.0) == []  # the machine's rule does not thaw it
    assert c.floor(1, 3.0, low) == []
    assert c.room(1, 4.0) == [lc.Thaw(1)]
    assert c.runs[1].phase is lc.Phase.RUNNING


def test_a_run_the_floor_holds_is_ended_as_its_window_closes() -> None:
    c = core()
    low = runcaps.disk_under(M, 2 * G, "2G", "/w") or ""
    c.floor(1, 1.0, low)
    assert c.tick(61.0) == [lc.Term(1)]
    c.tick(66.0)
    [finish] = c.gone(1, 66.5)
    assert finish.outcome is lc.Outcome.INTERRUPTED and finish.reason == low


def test_room_while_the_person_is_back_leaves_it_frozen_by_the_machine() -> None:
    c = core()
    c.input(1.0)  # frozen by the machine, its window running
    deadline = c.runs[1].deadline
    c.floor(1, 2.0, "stopped: low runs.disk_floor = 2G")
    assert c.runs[1].deadline == deadline  # its window runs on
    assert c.room(1, 3.0) == []
    assert c.runs[1].frozen_by == lc.MACHINE and c.runs[1].deadline == deadline


def test_the_floor_leaves_a_run_the_person_holds_to_the_person() -> None:
    c = core()
    c.pause(1.0)
    assert c.floor(1, 2.0, "stopped: low runs.disk_floor = 2G") == []
    assert c.runs[1].frozen_by == lc.USER


# ------------------------------------------------------ the phone, the tray


def test_the_phone_is_told_of_a_cap_stop() -> None:
    reason = runcaps.memory_over(int(8.1 * G), 8 * G, "8G") or ""
    it = item_for(ev.Stamp(ev.CapStop(3, 9, "build the thing", reason), 0.0), 3600.0)
    assert it is not None and it.kind == "cap" and it.job_id == 3
    assert it.title == "Job 3 stopped at a cap" and reason in it.body
    assert "no attempt is spent" in it.body


def test_the_tray_says_a_cap_stop_once() -> None:
    n = Notices()
    n.update({"runs": [], "recent": []})  # primed
    reason = runcaps.memory_over(int(8.1 * G), 8 * G, "8G")
    st = {"runs": [{"id": 9, "job_id": 3, "title": "t", "state": "ending", "stopped": reason}]}
    [(title, body)] = n.update(st)
    assert title == "Job 3 stopped at a cap" and "runs.memory = 8G" in body
    recent = {"runs": [], "recent": [{"run_id": 9, "job_id": 3, "title": "t", "reason": reason}]}
    assert n.update(recent) == []
