"""A host socket that goes away as a contained Run starts costs the Run nothing.

The host's sockets are read a moment before bwrap starts, and bwrap makes
every mount point it is handed: one removed in between (a session bus that
ended, a browser's) had bwrap fail its set-up ("Can't create file at PATH:
Read-only file system") and the Run with it, an attempt spent, before the
agent ever started. In a suite that makes and ends hundreds of sockets, it
came out as a Job reaching review with two Runs, or not at all after `owl
start`. Now such a start is made again at once, the same Run, no attempt
spent; the agent printing bwrap's words changes nothing.

The moment is made here with the real bwrap behind a `bwrap` of the test's
own on the daemon's PATH, which removes the socket (once, when armed) just
before it runs the real one: what a program of the person's does in those
milliseconds."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from escapes.harness import base, daemon, done, landed, person, project
from escapes.test_sockets import servers
from owl.sandbox import raced
from support.need import programs

from owlproc import wait_for

__all__ = ["base"]

WRAPPER = """#!/bin/sh
# the socket's program ends it between Owl's reading and bwrap's start, once
case "$*" in *{only}*) if [ -e {arm} ]; then rm -f {arm} {sock}; fi ;; esac
exec {real} "$@"
"""


def wrapped_bwrap(base: Path, sock: Path, only: str = "") -> tuple[dict[str, str], Path]:
    """A PATH whose `bwrap` removes `sock` first when armed (and its command
    line holds `only`); the arming file."""
    real = shutil.which("bwrap")
    assert real is not None
    folder = base / "bin"
    folder.mkdir()
    arm = base / "armed"
    (folder / "bwrap").write_text(WRAPPER.format(arm=arm, sock=sock, real=real, only=only))
    (folder / "bwrap").chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}, arm


def test_a_socket_gone_as_the_sandbox_is_set_up_starts_the_same_run_again(base: Path) -> None:
    programs("bwrap", "pasta")
    home = person(base)
    proj = project(base)
    # in a folder of the host's the Run sees (the project's: the home is its own)
    sock = proj / "run" / "app.sock"
    sock.parent.mkdir()
    path, arm = wrapped_bwrap(base, sock)
    with servers(str(sock)):
        d = daemon(base, home, "", env=path)
        with d:
            arm.touch()  # after the daemon's own look at bwrap
            job = d.add("do the work", proj)
            d.machine("idle")  # a failed start would be followed by another Run
            j, log = done(d, job, timeout=120)
    assert not arm.exists() and not sock.exists()  # the socket did go as bwrap started
    assert [(r["outcome"], r["attempt"]) for r in j["runs"]] == [("succeeded", 1)], j["runs"]
    assert j["attempts_left"] == j["attempts"], j
    # bwrap 0.8 says "Can't create file at PATH", 0.11 (Debian 13's) "Can't create file PATH"
    assert re.search(rf"bwrap: Can't create file (at )?{re.escape(str(sock))}:", log), log
    assert f"owl: the sandbox could not be set up ({sock} went away as it started)" in log, log
    assert "committed" in log, log
    landed(proj, j["branch"])


def a_check_that_may_lose(base: Path) -> tuple[Path, Path, dict[str, str], Path, Path]:
    """(the person's home, an app's socket in the project's folder, the PATH whose bwrap removes
    it when armed before a check's sandbox only, its arming file, a project
    whose one check is that check)."""
    programs("bwrap", "pasta")
    home = person(base)
    checks = "[[checks]]\nname = 'work'\nrun = 'test -f work.txt # lost-start'\n"
    proj = project(base, {"README": "x\n", ".owl.toml": checks})
    sock = proj / "run" / "app.sock"  # where the Run sees it: the project's folder
    sock.parent.mkdir()
    path, arm = wrapped_bwrap(base, sock, only="lost-start")
    return home, sock, path, arm, proj


def test_a_check_whose_sandbox_lost_the_same_race_runs_again_and_passes(base: Path) -> None:
    """The same moment, lost by a check's sandbox: the same check starts again,
    no failed check is recorded, and the Run is not spent on it (a failed
    check would have sent the agent round again)."""
    home, sock, path, arm, proj = a_check_that_may_lose(base)
    with servers(str(sock)):
        d = daemon(base, home, "", env=path)
        with d:
            arm.touch()
            job = d.add("do the work", proj)
            d.machine("idle")
            j, log = done(d, job, timeout=120)
            said = d.log_text()
    assert not arm.exists() and not sock.exists()  # the check's bwrap did lose it
    [run] = j["runs"]
    assert run["outcome"] == "succeeded", j["runs"]
    assert [(c["name"], c["passed"]) for c in run["checks"]] == [("work", True)], run["checks"]
    assert f"the sandbox could not be set up ({sock} went away as it started)" in said, said
    landed(proj, j["branch"])


def test_owl_jobs_verify_starts_a_check_that_lost_the_race_again(base: Path) -> None:
    """The person's `owl jobs verify`, its check's sandbox losing the same
    moment: started again, the verification passes, no failed check kept."""
    home, sock, path, arm, proj = a_check_that_may_lose(base)
    with servers(str(sock)):
        d = daemon(base, home, "", env=path)
        with d:
            job = d.add("do the work", proj)
            d.machine("idle")
            done(d, job, timeout=120)
            arm.touch()  # the Run's check ran as ever: the person's verify loses it
            assert "running 1 check" in d.ok("jobs", "verify", str(job))
            wait_for(
                lambda: f"job {job} verified on demand" in d.log_text(), 60, what="its verdict"
            )
            j, said = d.job(job), d.log_text()
    assert not arm.exists() and not sock.exists()  # the verify's bwrap did lose it
    assert j["state"] == "review" and j["verify"]["passed"] is True, j["verify"]
    assert [(c["name"], c["passed"]) for c in j["verify"]["checks"]] == [("work", True)]
    assert f"the sandbox could not be set up ({sock} went away as it started)" in said, said


def test_the_words_count_only_for_a_covered_socket_now_gone() -> None:
    line = "bwrap: Can't create file at /home/me/.app/app.sock: Read-only file system"
    masked = ["/home/me/.app/app.sock"]
    assert raced.raced([line], masked, exists=lambda p: False) == masked[0]
    # bwrap 0.11's words (Debian 13's), without "at"
    newer = "bwrap: Can't create file /home/me/.app/app.sock: Read-only file system"
    assert raced.raced([newer], masked, exists=lambda p: False) == masked[0]
    # the agent printing them: the socket is still there (covered inside)
    assert raced.raced([line], masked, exists=lambda p: True) is None
    # a socket not covered by this Run, or a longer path that starts the same
    assert raced.raced([line], ["/home/me/.app/other.sock"], exists=lambda p: False) is None
    assert raced.raced([line], ["/home/me/.app/app"], exists=lambda p: False) is None
    # bwrap says so before anything else; later words are the agent's
    late = ["working"] * raced.HEAD + [line]
    assert raced.raced(late, masked, exists=lambda p: False) is None
    # its other wording, with the path inside its new root
    mount = "bwrap: Can't bind mount /oldroot/dev/null on /newroot/home/me/.app/app.sock: No such"
    assert raced.raced([mount], masked, exists=lambda p: False) == masked[0]
