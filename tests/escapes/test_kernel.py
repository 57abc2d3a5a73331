"""The kernel's own ways out of a contained Run: the session keyring, a
terminal's input, bwrap's pid 1, the kernel's tracing, modules and mounts.

The session keyring is no namespace's: bwrap keeps the daemon's, so a key
the person's session holds there (a kerberos ticket, an ecryptfs passphrase,
a token a tool stashed with ``keyctl``) was read from inside a Run and from
inside its check. bwrap's pid 1 inside runs outside the seccomp filter (bwrap
loads it just before it execs the command): traced, or its memory written, it
would run code with none of the filter. Its command line named Owl's folders
and the host's sockets.

Each way is a system call made by a small C program (``probe.c``) with
arguments the kernel, reached, answers with anything but EPERM: today's code
lets each reach the kernel; the seccomp filter (``owl.sandbox.syscalls``)
refuses each with EPERM. What the Run may still do is shown too: trace its
own children (gdb and strace of a test) and finish its Job. As root and as an
ordinary user."""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from escapes.asuser import WHO, compile_probe, owl_as
from escapes.harness import base, done, landed, person, project, refused
from support.need import programs

__all__ = ["base"]

KEY_NAME = "owl-escape-key"
KEY_SECRET = "the session keyring's secret"

SYS_ADD_KEY, SYS_KEYCTL = 248, 250  # x86_64
KEY_SPEC_SESSION_KEYRING = -3
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_REVOKE = 1, 3

ATTACK = r"""
test -x "$PROBE" && echo "the probe is in sight"
try "read a key of the daemon's session keyring" "$PROBE key-read $KEY | grep -q 'keyring.s secret'"
try "ask the keyring for a key" "$PROBE request-key $KEY"
try "add a key to a keyring" "$PROBE add-key"
try "type into a terminal (TIOCSTI)" "$PROBE tiocsti"
try "read the console (TIOCLINUX)" "$PROBE tioclinux"
try "trace pid 1" "$PROBE ptrace-init"
try "trace pid 1 named with a high bit" "$PROBE ptrace-init-high"
try "read pid 1's memory" "$PROBE vm-read-init"
try "write pid 1's memory" "$PROBE vm-write-init"
try "open pid 1's memory file" "$PROBE mem-init"
try "take pid 1's open files" "$PROBE pidfd-getfd"
try "load a BPF program" "$PROBE bpf"
try "open a perf event" "$PROBE perf"
try "make a userfaultfd" "$PROBE userfaultfd"
try "mount, in a namespace of its own" "$PROBE mounts"
try "unload a kernel module" "$PROBE delete-module"
try "load a kernel module" "$PROBE init-module"
try "load a kernel module from a file" "$PROBE finit-module"
try "load a kernel to boot" "$PROBE kexec-load"
try "load a kernel to boot from a file" "$PROBE kexec-file-load"
try "read Owl's folders in pid 1's command line" "tr '\0' '\n' < /proc/1/cmdline | grep -q -e '$OWL_GUESS' -e '^--ro-bind$' -e '^--tmpfs$'"
$PROBE ptrace-own && echo "traced its own child"
strace -f -o /dev/null true && echo "strace ran"
"""

CHECK = """#!/bin/sh
test -x {probe} || exit 1
{probe} key-read {key} && exit 1
{probe} ptrace-init && exit 1
{probe} tiocsti && exit 1
echo "the check was refused too"
"""

REFUSED = [line.split('"')[1] for line in ATTACK.splitlines() if line.startswith('try "')]


def _syscall(*args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(*args)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return int(r)


@pytest.fixture
def session_key() -> Iterator[int]:
    """A key in a session keyring of this process's own, which the daemon it
    starts (and, today, every Run) inherits."""
    if os.uname().machine != "x86_64":
        pytest.skip("the keyring's system call numbers here are x86_64's")
    # a keyring of its own name: a parallel test joining the same one would share it
    _syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, f"owl-escape-{os.getpid()}".encode())
    data = KEY_SECRET.encode()
    key = _syscall(
        SYS_ADD_KEY, b"user", KEY_NAME.encode(), data, len(data), KEY_SPEC_SESSION_KEYRING
    )
    try:
        yield key
    finally:
        _syscall(SYS_KEYCTL, KEYCTL_REVOKE, key)


@pytest.mark.parametrize("who", WHO)
def test_the_kernels_ways_out_are_refused_in_a_run_and_its_check(
    base: Path, session_key: int, who: str
) -> None:
    programs("bwrap", "gcc", "strace")
    probe = compile_probe(base)
    # outside, the probe reads the key: its refusal inside is the sandbox's
    said = subprocess.run([probe, "key-read", KEY_NAME], capture_output=True, text=True)
    assert KEY_SECRET in said.stdout, said
    home = person(base)
    check = CHECK.format(probe=probe, key=KEY_NAME)
    proj = project(
        base, {"check.sh": check, ".owl.toml": "[[checks]]\nname = 'kernel'\nrun = 'sh check.sh'\n"}
    )
    known = {"PROBE": probe, "KEY": KEY_NAME, "OWL_GUESS": base / "owl"}
    # the probe is out of a Run's sight unless named (the Run's /var is its own)
    with owl_as(who, base, home, proj, ATTACK, known=known, sandbox={"read": [str(probe)]}) as d, d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    assert "the probe is in sight" in log, log  # else every "refused" below is void
    refused(log, *REFUSED)
    assert "traced its own child" in log and "strace ran" in log, log
    assert KEY_SECRET not in log, log
    [c] = j["runs"][-1]["checks"]
    assert c["passed"] and "the check was refused too" in c["output"], c
    landed(proj, j["branch"])
