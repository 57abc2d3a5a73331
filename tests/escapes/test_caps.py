"""Capabilities, mounts, user namespaces, the Run's cgroup, processes outside
it, and its memory through /tmp.

Owl run as root (a container, CI: as these tests run) gave a Run every
capability, and ``umount $HOME/.ssh`` showed the key. A root's Run now has a
user namespace of its own with every capability dropped (bwrap drops them
itself for any other user); no_new_privs is set for all. A user namespace
made inside gets no further: the mounts it would copy are locked to it. The
cgroup files are on the read-only root. No process outside the Run is in its
PID namespace to be traced or signalled. ``/tmp`` and ``/dev/shm`` are bounded
by ``sandbox.tmp_size``: a full one is ENOSPC for the agent, not for the machine."""

from __future__ import annotations

import os

from escapes.harness import KEY, base, daemon, done, landed, person, project, refused
from owl.tree import cgroup
from support.need import programs

__all__ = ["base"]

ATTACKS = r"""
key="$HOME/.ssh/id_ed25519"
grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status
try "keep a capability" "grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status | grep -qv '0000000000000000'"
try "unmount what hides a secret" "umount $HOME/.ssh"
try "read the key after unmounting" "umount -l $HOME/.ssh; grep -q PRIVATE $key"
try "mount a tmpfs" "mount -t tmpfs none $HOME"
try "mount the root again" "mkdir -p /tmp/r && mount --bind / /tmp/r && grep -q PRIVATE /tmp/r$key"
try "unmount in a user namespace of its own" "unshare -Urm sh -c 'umount $HOME/.ssh; cat $key' | grep -q PRIVATE"
try "bind the root in a user namespace of its own" "unshare -Urm sh -c 'mkdir -p /tmp/r2 && mount --bind / /tmp/r2 && cat /tmp/r2$key' | grep -q PRIVATE"
try "a user namespace unmapped" "unshare -Um sh -c 'umount $HOME/.ssh; cat $key' | grep -q PRIVATE"
try "map root in a user namespace" "unshare -U --map-root-user true"
try "regain root through a setuid program" "su -c true root </dev/null"
cg2=$(grep ' - cgroup2 ' /proc/self/mountinfo | head -1 | cut -d' ' -f5)
own=$(grep '^0::' /proc/self/cgroup)
echo "cgroup: $own"
try "move itself out of its cgroup" "echo \$\$ > $cg2/cgroup.procs"
try "make a cgroup of its own" "mkdir $cg2/owl-escape"
try "thaw its own cgroup" "echo 0 > $cg2${own#0::}/cgroup.freeze"
try "move itself in a v1 hierarchy" "echo \$\$ > /sys/fs/cgroup/freezer/cgroup.procs"
test "$(grep '^0::' /proc/self/cgroup)" = "$own" && echo "still in its cgroup"
try "see a process outside" "kill -0 $OUTSIDE_PID"
try "trace a process outside" "python3 -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0 else 1)' $OUTSIDE_PID"
test "$(ls -d /proc/[0-9]* | wc -l)" -lt 20 && echo "few processes in sight"
try "fill /tmp past its size" "head -c 64M /dev/zero > /tmp/fill"
try "fill /dev/shm past its size" "head -c 64M /dev/zero > /dev/shm/fill"
rm -f /tmp/fill /dev/shm/fill
echo small > /tmp/small && echo "/tmp usable again"
"""

WAYS = (
    "keep a capability",
    "unmount what hides a secret",
    "read the key after unmounting",
    "mount a tmpfs",
    "mount the root again",
    "unmount in a user namespace of its own",
    "bind the root in a user namespace of its own",
    "a user namespace unmapped",
    "regain root through a setuid program",
    "move itself out of its cgroup",
    "make a cgroup of its own",
    "thaw its own cgroup",
    "see a process outside",
    "trace a process outside",
    "fill /tmp past its size",
    "fill /dev/shm past its size",
)


def test_a_roots_run_has_no_capability_and_no_way_to_mount_or_leave(base):
    programs("bwrap", "unshare", "umount")
    home = person(base)
    proj = project(base)
    d = daemon(
        base,
        home,
        ATTACKS,
        known={"OUTSIDE_PID": os.getpid()},
        sandbox={"tmp_size": "8M"},
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(log, *WAYS)
    assert "CapBnd:\t0000000000000000" in log or os.getuid() != 0, log
    assert "NoNewPrivs:\t1" in log, log
    assert "still in its cgroup" in log and "few processes in sight" in log, log
    assert "/tmp usable again" in log, log
    if os.getuid() == 0 and cgroup.delegated_base() is not None:
        assert "/run-" in log.split("cgroup: ", 1)[1].splitlines()[0], log
    assert (home / ".ssh" / "id_ed25519").read_text() == KEY
    landed(proj, j["branch"])
