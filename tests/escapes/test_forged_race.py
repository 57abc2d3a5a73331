"""An agent that forges bwrap's words for a lost start, to be started again
for nothing or to have a failing check not count.

A start whose sandbox lost the race with a host socket going away is made
again and is no verdict (`owl.sandbox.raced`): for a Run, a Run's check and
`owl jobs verify`'s check. The words that say so are bwrap's, at the head of
the output, and an agent can print them: here it does, naming a host socket
its Run covers, first in its own output and then in the check's (a script of
the worktree's, which the agent rewrites). It tries to make them true by
removing the socket, which is a mount point inside the Run. Each forged start
is judged as it ended: the Run failed and spent its attempt, the check failed
in the Run and in the verify, nothing was started again, and the host's
socket is still there."""

from __future__ import annotations

from pathlib import Path

from escapes.harness import base, daemon, person, project
from escapes.test_sockets import servers
from owlproc import wait_for
from support.need import programs

__all__ = ["base"]

ATTACK = r"""
forged="bwrap: Can't create file at $SOCK: Read-only file system"
if [ ! -e .forged-once ]; then
  touch .forged-once
  echo "$forged"                     # the Run's own output, first
  try "remove the covered socket" "rm -f '$SOCK' && test ! -e '$SOCK'"
  exit 1
fi
printf '#!/bin/sh\necho "%s"\nexit 1\n' "$forged" > verdict.sh
git add verdict.sh && git commit -qm "the check, forged"
"""


def test_forged_words_of_a_lost_start_are_judged_as_the_start_ended(base: Path) -> None:
    programs("bwrap", "pasta")
    home = person(base)
    checks = "[[checks]]\nname = 'verdict'\nrun = 'sh verdict.sh'\n"
    proj = project(base, {"verdict.sh": "exit 0\n", ".owl.toml": checks})
    # a socket in a folder of the host's the Run sees (the project's: the home
    # is the Run's own), so covered by a mount the Run cannot remove
    sock = proj / "run" / "app.sock"
    sock.parent.mkdir()
    with servers(str(sock)):
        d = daemon(base, home, ATTACK, known={"SOCK": sock}, config={"jobs": {"attempts": 2}})
        with d:
            job = d.add("do the work", proj)
            d.machine("idle")
            j = d.wait_job(job, "blocked", timeout=120)  # its checks failed on every attempt
            assert "running 1 check" in d.ok("jobs", "verify", str(job))
            wait_for(lambda: f"job {job} verified on demand" in d.log_text(), 60, what="verdict")
            after, said = d.job(job), d.log_text()
        assert sock.is_socket()  # the host's socket, untouched
    first, second = j["runs"]
    assert (first["outcome"], first["attempt"]) == ("failed", 1), j["runs"]
    assert "refused: remove the covered socket" in Path(first["log"]).read_text()
    assert (second["outcome"], second["attempt"]) == ("failed", 2), j["runs"]
    assert [(c["name"], c["passed"]) for c in second["checks"]] == [("verdict", False)]
    assert after["state"] == "blocked" and after["verify"]["passed"] is False, after["verify"]
    assert [(c["name"], c["passed"]) for c in after["verify"]["checks"]] == [("verdict", False)]
    assert "went away as it started" not in said, said  # nothing was started again
