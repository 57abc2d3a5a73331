"""The daemon's secrets in a process's environment (``/proc/PID/environ``).

bwrap is pid 1 inside the Run: whatever environment it was started with, the
agent can read there, whatever ``--unsetenv`` cleaned for its child. So the
sandbox's own processes start with the agent's environment, no more: a secret
variable, the display, the session's runtime folder and Owl's home are in no
process the Run can see. A check runs the project's tests, which the agent
wrote: it is started the same way, and tries the same."""

from __future__ import annotations

from escapes.harness import base, daemon, done, landed, person, project, refused
from support.need import programs

__all__ = ["base"]


SCAN = r"""
environs() { for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null; }
test "$(tr '\0' '\n' < /proc/1/environ | grep -c .)" -gt 0 && echo "pid 1's environment read"
try "read the daemon's secrets in a process's environment" "environs | grep -q -e ghp_daemon_secret -e sk-daemon-secret"
try "read the display or the session's folder there" "environs | grep -q -e ^DISPLAY= -e ^XDG_RUNTIME_DIR= -e ^WAYLAND_DISPLAY="
try "read Owl's home there" "environs | grep -q ^OWL_HOME="
# the Run's own worktree lies in Owl's home: any other path there is Owl's
try "read a path of Owl's there" "environs | grep \"$OWL_HOME_GUESS\" | grep -qv /worktrees/job-"
"""

CHECK = r"""for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null |
  grep -e ghp_daemon_secret -e sk-daemon-secret -e ^DISPLAY= -e ^OWL_HOME= -e ^XDG_RUNTIME_DIR= &&
  exit 1
echo "nothing of the daemon's"
"""


def test_no_process_of_a_run_or_a_check_carries_the_daemons_secrets(base):
    programs("bwrap")
    home = person(base)
    proj = project(
        base,
        {"check.sh": CHECK, ".owl.toml": "[[checks]]\nname = 'environ'\nrun = 'sh check.sh'\n"},
    )
    d = daemon(
        base,
        home,
        SCAN,
        known={"OWL_HOME_GUESS": base / "owl"},
        env={
            "GITHUB_TOKEN": "ghp_daemon_secret",
            "MY_API_KEY": "sk-daemon-secret",
            "DISPLAY": ":99",
            "XDG_RUNTIME_DIR": str(base / "runtime"),
        },
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(
        log,
        "read the daemon's secrets in a process's environment",
        "read the display or the session's folder there",
        "read Owl's home there",
        "read a path of Owl's there",
    )
    assert "pid 1's environment read" in log, log
    [check] = j["runs"][-1]["checks"]
    assert check["passed"] and "nothing of the daemon's" in check["output"], check
    landed(proj, j["branch"])
