"""A damaged owl.db is said in one line by every verb that reads it, and saved.

The file is damaged for real: a page of the Jobs table overwritten inside the
file the real daemon wrote. The real `owl` command then reads it, checks it
and recovers it; the real daemon starts on what was saved."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path

from owlproc import OwlDaemon, make_project

PAGE = 4096
PAD = "p" * 1500  # about two Jobs a page, so one page holds few of them


def _one_line_refusal(p, db: Path, code: int = 1) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    [line] = p.stderr.strip().splitlines()
    assert str(db) in line and "owl db recover" in line, line
    return line


def _make_queue(tmp_path: Path) -> tuple[OwlDaemon, list[int], list[int]]:
    project = make_project(tmp_path / "proj")
    d = OwlDaemon(tmp_path / "home", {"runs": {"max_parallel": 1}})
    with d:
        ran = [d.add(f"exit=0 marker-{i}-end {PAD}", project) for i in range(3)]
        d.machine("idle")
        for job in ran:
            d.wait_job(job, "review")
        d.machine("input")
        queued = [d.add(f"sleep=1 marker-{i}-end {PAD}", project) for i in range(3, 30)]
    return d, ran, queued


def _overwrite_page_holding(db: Path, marker: bytes) -> set[int]:
    """Overwrite the page that holds `marker`; the Job ids whose rows it held."""
    data = bytearray(db.read_bytes())
    at = data.find(marker)
    assert at > 0, "the marker is in the file"
    start = at // PAGE * PAGE
    page = bytes(data[start : start + PAGE])
    lost = {int(m.split(b"-")[1]) for m in re.findall(rb"marker-\d+-end", page)}
    data[start : start + PAGE] = b"\xff" * PAGE
    db.write_bytes(bytes(data))
    return lost


def _integrity(db: Path) -> str:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        return str(e)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_damaged_database_is_said_in_one_line_and_its_rows_saved(tmp_path: Path) -> None:
    d, ran, queued = _make_queue(tmp_path)
    db = d.home / "owl.db"
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    lost_markers = _overwrite_page_holding(db, b"marker-17-end")
    # marker i is Job ran+queued[i]
    ids = ran + queued
    lost = {ids[i] for i in lost_markers}
    assert lost and len(lost) < 5
    assert _integrity(db) != "ok"
    damaged = _digest(db)

    # every verb that reads the file without the daemon: one line, no traceback
    _one_line_refusal(d.owl("jobs"), db)
    _one_line_refusal(d.owl("jobs", "show", str(ran[0])), db)
    _one_line_refusal(d.owl("logs", "1"), db)
    _one_line_refusal(d.owl("status"), db, code=3)
    line = _one_line_refusal(d.owl("db", "check"), db)
    assert "damaged" in line
    assert _digest(db) == damaged  # reading changed nothing

    p = d.owl("db", "recover")
    assert p.returncode == 0, p.stderr
    saved = len(ids) - len(lost)
    assert f"saved {saved} Jobs and 3 Runs" in p.stdout, p.stdout
    [kept] = [
        q
        for q in d.home.iterdir()
        if q.name.startswith("owl.db.damaged-") and not q.name.endswith(("-wal", "-shm"))
    ]
    assert str(kept) in p.stdout and _digest(kept) == damaged

    p = d.owl("db", "recover")  # a whole file is left as it is
    assert p.returncode == 1 and "nothing to recover" in p.stderr, p.stderr
    check = d.json("db", "check")
    assert check["ok"] and check["counts"]["jobs"] == saved and check["counts"]["runs"] == 3
    with d:
        p = d.owl("db", "recover")  # the daemon holds the file
        assert p.returncode == 1 and "daemon is running" in p.stderr, p.stderr
        listed = d.json("jobs", "list")
        assert sorted(j["id"] for j in listed) == sorted(set(ids) - lost)
        assert all(j["state"] == "review" for j in listed if j["id"] in ran)
        assert [j["id"] for j in listed if j["state"] == "pending"] == [
            j for j in queued if j not in lost
        ]
        shown = d.job(ran[0])
        assert shown["runs"][0]["outcome"] == "succeeded"
        assert shown["title"].startswith("exit=0 marker-0-end")


def test_an_emptied_database_is_not_an_empty_queue(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        d.add("sleep=1", project)
    db = d.home / "owl.db"
    os.truncate(db, 0)
    for side in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        side.unlink(missing_ok=True)
    for verb in (("jobs",), ("jobs", "list", "--json"), ("logs", "1")):
        line = _one_line_refusal(d.owl(*verb), db)
        assert "empty" in line
    _one_line_refusal(d.owl("status"), db, code=3)
    # the daemon refuses it too, and leaves it as it is
    d.start(wait=False)
    assert d.proc.wait(20) == 1
    assert db.stat().st_size == 0 and "empty" in d.log_text().strip().splitlines()[-1]
    p = d.owl("db", "recover")
    assert p.returncode == 0 and "saved 0 Jobs and 0 Runs" in p.stdout, p.stderr
    [kept] = [
        q
        for q in d.home.iterdir()
        if q.name.startswith("owl.db.damaged-") and not q.name.endswith(("-wal", "-shm"))
    ]
    assert kept.stat().st_size == 0
    with d:
        assert d.json("jobs", "list") == []
        assert json.loads(d.ok("db", "check", "--json"))["ok"]
