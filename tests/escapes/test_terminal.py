"""Typing into the person's terminal (``TIOCSTI``), and a terminal at all.

A process with a terminal as its controlling one, or an fd of it, can push
keystrokes into its input queue: a command the person's shell then runs. A
Run has none: it starts in a session of its own (``setsid`` by Owl's
reaper, ``--new-session`` by bwrap) with /dev/null and its log as its
stdio, and its /dev is bwrap's own, whose pts instance holds none of the
host's terminals."""

from __future__ import annotations

import os

from escapes.harness import base, daemon, done, landed, person, project, refused
from support.need import programs

__all__ = ["base"]

ATTACKS = r"""
sti() { python3 -c 'import fcntl, os, sys, termios
fd = os.open(sys.argv[1], os.O_RDWR) if sys.argv[1].startswith("/") else int(sys.argv[1])
fcntl.ioctl(fd, termios.TIOCSTI, b"x")' "$1"; }
try "open a controlling terminal" "exec 3<>/dev/tty"
try "type into its stdin's terminal" "sti 0"
try "type into its stdout's terminal" "sti 1"
try "type into its stderr's terminal" "sti 2"
try "open the person's terminal" "exec 3<>$PERSONS_TTY"
try "type into the person's terminal" "sti $PERSONS_TTY"
try "find a terminal of the host's" "ls /dev/pts | grep -qv ptmx"
test "$(ps -o tty= -p $$ | tr -d ' ')" = "?" && echo "no terminal"
"""


def test_a_run_has_no_terminal_to_type_into(base):
    programs("bwrap", "ps")
    home = person(base)
    proj = project(base)
    leader, follower = os.openpty()  # the person's terminal, open on the host
    try:
        os.set_blocking(leader, False)
        d = daemon(base, home, ATTACKS, known={"PERSONS_TTY": os.ttyname(follower)})
        with d:
            job = d.add("do the work", proj)
            d.ok("start")
            j, log = done(d, job)
        refused(
            log,
            "open a controlling terminal",
            "type into its stdin's terminal",
            "type into its stdout's terminal",
            "type into its stderr's terminal",
            "open the person's terminal",
            "type into the person's terminal",
            "find a terminal of the host's",
        )
        assert "no terminal" in log, log
        try:
            typed = os.read(leader, 100)
        except BlockingIOError:
            typed = b""
        assert typed == b"", typed
        landed(proj, j["branch"])
    finally:
        os.close(leader)
        os.close(follower)
