"""`owl jobs` on one screen: a long queue is listed a page at a time, through
the real daemon (and from the database when none runs).

The page holds what matters first (a Job in review, however old, then the
head of the queue) and says how many more there are; `--all` lists every
Job, `--limit N` at most N; `--json` lists every Job unless --limit is given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project

QUEUED = 30


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("page")
    project = make_project(root / "proj")
    with OwlDaemon(root / "home") as d:
        review = d.add("write=a.txt commit=a exit=0", project)
        d.machine("idle")
        d.wait_job(review, "review")
        d.machine("input")  # nothing else starts
        queued = [
            int(d.ask("add", prompt=f"sleep=60 queued {n}", project=str(project))["id"])
            for n in range(QUEUED)
        ]
        dropped = queued.pop()
        d.ok("jobs", "drop", str(dropped))
        d.review, d.queued, d.dropped = review, queued, dropped  # type: ignore[attr-defined]
        yield d


def rows(out: str) -> list[list[str]]:
    """The table's rows (the header left out), each cut into its first columns."""
    lines = [ln for ln in out.splitlines() if not ln.startswith("…")]
    assert lines[0].split()[:3] == ["ID", "POS", "STATE"], out
    return [ln.split()[:3] for ln in lines[1:]]


def test_a_pipe_gets_twenty_jobs_and_how_many_more(daemon: OwlDaemon) -> None:
    out = daemon.ok("jobs")
    listed = rows(out)
    assert len(listed) == 20
    # the head of the queue in order, and the Job in review although it is the oldest
    assert [r[1] for r in listed[:19]] == [str(n) for n in range(1, 20)]
    assert listed[19] == [str(daemon.review), "-", "review"]  # type: ignore[attr-defined]
    assert out.splitlines()[-1] == f"… and {QUEUED - 20} more (owl jobs --all)"


def test_limit_n_lists_at_most_n(daemon: OwlDaemon) -> None:
    out = daemon.ok("jobs", "--limit", "5")
    listed = rows(out)
    assert [r[1] for r in listed] == ["1", "2", "3", "4", "-"]
    assert listed[-1][0] == str(daemon.review)  # type: ignore[attr-defined]
    assert out.splitlines()[-1] == f"… and {QUEUED - 5} more (owl jobs --all)"
    assert rows(daemon.ok("jobs", "list", "--limit", "2"))[0][1] == "1"  # the action spelt out


def test_all_lists_every_job_on_one_page(daemon: OwlDaemon) -> None:
    out = daemon.ok("jobs", "--all")
    listed = rows(out)
    assert len(listed) == QUEUED + 1 and "more" not in out
    assert [str(daemon.dropped), "-", "cancelled"] in listed  # type: ignore[attr-defined]
    limited = rows(daemon.ok("jobs", "--all", "--limit", "3"))
    assert len(limited) == 3


def test_json_lists_every_job_unless_limited(daemon: OwlDaemon) -> None:
    p = daemon.owl("jobs", "--json")
    assert p.returncode == 0 and p.stderr == ""
    jobs = json.loads(p.stdout)
    assert len(jobs) == QUEUED  # 29 queued and the one in review
    assert [j["position"] for j in jobs[:3]] == [1, 2, 3]
    p = daemon.owl("jobs", "--json", "--limit", "3")
    assert p.returncode == 0
    assert [j["position"] for j in json.loads(p.stdout)] == [1, 2, None]
    assert p.stderr.strip() == f"… and {QUEUED - 3} more (owl jobs --all)"


def test_a_limit_is_a_whole_number_of_one_or_more(daemon: OwlDaemon) -> None:
    for bad in ("0", "-1", "x"):
        p = daemon.owl("jobs", "--limit", bad)
        assert p.returncode == 2 and "--limit" in p.stderr, (bad, p.stderr)
    p = daemon.owl("jobs", "--limit")
    assert p.returncode == 2 and "expected one argument" in p.stderr


def test_the_socket_gives_a_page_and_the_count_of_the_rest(daemon: OwlDaemon) -> None:
    page = daemon.ask("jobs.list", limit=4)
    assert page["more"] == QUEUED - 4 and len(page["jobs"]) == 4
    assert isinstance(daemon.ask("jobs.list"), list)  # no limit: every Job, as before


def test_with_no_daemon_the_database_is_paged_too(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        for n in range(8):
            d.ask("add", prompt=f"sleep=60 n{n}", project=str(project))
    p = d.owl("jobs", "--limit", "3")
    assert p.returncode == 3
    assert [r[1] for r in rows(p.stdout)] == ["1", "2", "3"]
    assert p.stdout.splitlines()[-1] == "… and 5 more (owl jobs --all)"
    assert len(rows(d.owl("jobs").stdout)) == 8
