"""The system calls a contained Run is refused: a seccomp filter handed to bwrap.

Why: the filesystem view and the namespaces leave the kernel's own ways out.
The session keyring is not namespaced (bwrap keeps the daemon's, and a key held
there was read from inside a Run and a check); a terminal takes typed input
from TIOCSTI; bwrap's own pid 1 inside, which runs outside this filter (bwrap
installs it just before it execs the command), could be traced and its memory
written. The set is what the anchors deny (Docker's, Flatpak's default
profiles; Codex's and sandbox-runtime's Linux sandboxes) that no agent needs:

- the keyring: ``keyctl``, ``add_key``, ``request_key``;
- a terminal's input and console: ``ioctl`` TIOCSTI and TIOCLINUX (compared on
  the low 32 bits, as the kernel reads the request: no high bit slips past);
- pid 1 of the Run's PID namespace, the one process there it did not start:
  ``ptrace``, ``process_vm_readv``/``_writev`` naming it (pid compared on the
  low 32 bits too), and ``pidfd_getfd`` (another process's fds) for all. A
  Run may still trace what it started itself: gdb and strace of a test work.
  Its memory through ``/proc/1/mem`` is closed by the mount laid over it
  (``bwrap.py``), which nothing inside can take away (``umount2`` is refused);
- the kernel's tracing and modules: ``bpf``, ``perf_event_open``,
  ``userfaultfd`` (a tool of races against the kernel), ``kexec_load``,
  ``kexec_file_load``, ``init_module``, ``finit_module``, ``delete_module``;
- the mount table: ``mount``, ``umount2``, ``pivot_root`` and the new mount
  API (``fsopen``, ``fsmount``, ``fspick``, ``open_tree``, ``move_mount``,
  ``mount_setattr``), in any namespace: no agent mounts, and what bwrap laid
  over a secret stays. New user namespaces stay allowed: a headless browser's
  own sandbox (a test suite's Chromium) makes them, and the mounts they copy
  are locked;
- io_uring (``io_uring_setup``, ``_enter``, ``_register``): its requests make
  and connect sockets, open files, without the system calls this filter
  reads (Docker's default profile refuses it too; libuv and the rest fall
  back to plain calls when it is refused);
- unix sockets, unless ``sandbox.sockets`` opens them (``unix=True``):
  ``socket(AF_UNIX, …)``, so that a socket the person's tools bind later in a
  folder of the host's the Run sees (git's fsmonitor daemon's in the
  project's ``.git``, a dev server's in the project) cannot be connected to,
  whenever it was bound; and ``socketpair(AF_UNIX, SOCK_DGRAM, …)``, whose
  datagram socket can be aimed at any path by ``connect``/``sendto``.
  ``socketpair`` of a stream or a packet stays: Node's libuv, Python's
  asyncio and Chromium make their own pipes with it, and such a pair cannot
  be connected anywhere else. On the 32-bit companions ``socketcall`` is
  refused whole (its arguments lie in memory: the family cannot be read).

Each is refused with EPERM, as a process without the right gets it, so a tool
that probes goes on. The filter holds the native architecture and its 32-bit
companions (i386 and x32 on x86_64, arm on aarch64), so no other calling
convention goes around it. It is one of two for every Run (unix sockets
refused, or opened): each built once, in a fraction of a millisecond, and
kept (``bpf``).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

# An ioctl request is an unsigned int: the kernel reads the low 32 bits.
LOW32 = 0xFFFFFFFF
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
INIT = 1  # the PID namespace's init: bwrap's own process, not the Run's

ALWAYS = (
    "keyctl",
    "add_key",
    "request_key",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "umount",
    "pivot_root",
    "fsopen",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
AF_UNIX = 1
SOCK_TYPE = 0xF  # the type's own bits, below SOCK_NONBLOCK and SOCK_CLOEXEC
SOCK_DGRAM = 2
IOCTLS = (TIOCSTI, TIOCLINUX)  # ioctl(fd, request): request is argument 1
OF_INIT = (("ptrace", 1), ("process_vm_readv", 0), ("process_vm_writev", 0))  # (call, pid's arg)
COMPANIONS = {"x86_64": ("x86", "x32"), "aarch64": ("arm",)}

INSTALL_HINT = "sudo apt install python3-seccomp"


@dataclass(frozen=True)
class Rule:
    """One refusal: a system call, and each (arg, mask, value) it holds for:
    the argument's bits under ``mask`` equal to ``value`` (all must hold)."""

    call: str
    args: tuple[tuple[int, int, int], ...] = ()


def rules(unix: bool = False) -> Iterator[Rule]:
    """Every refusal of the filter, as data (the tests read the same list).
    ``unix``: unix sockets opened (``sandbox.sockets`` names some, or "own")."""
    for call in ALWAYS:
        yield Rule(call)
    for request in IOCTLS:
        yield Rule("ioctl", ((1, LOW32, request),))
    for call, arg in OF_INIT:
        yield Rule(call, ((arg, LOW32, INIT),))
    if not unix:
        yield Rule("socket", ((0, LOW32, AF_UNIX),))
        yield Rule("socketpair", ((0, LOW32, AF_UNIX), (1, SOCK_TYPE, SOCK_DGRAM)))
        yield Rule("socketcall")


@functools.cache
def bpf(unix: bool = False) -> bytes | str:
    """The filter as the BPF program bwrap's ``--seccomp`` reads, or why there
    is none (libseccomp's Python binding missing), with what fixes it.
    ``unix``: the filter of a Run whose unix sockets are opened."""
    try:
        import seccomp  # Debian's python3-seccomp: the distribution's path is in the venv
    except ImportError:
        return f"no system-call filter: libseccomp's Python binding is missing ({INSTALL_HINT})"
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in COMPANIONS.get(os.uname().machine, ()):
        try:
            f.add_arch(getattr(seccomp.Arch, name.upper()))
        except (AttributeError, OSError, RuntimeError, ValueError):
            continue  # a kernel or libseccomp without it: that convention is refused anyway
    deny = seccomp.ERRNO(errno.EPERM)
    for rule in rules(unix):
        held = [seccomp.Arg(arg, seccomp.MASKED_EQ, mask, value) for arg, mask, value in rule.args]
        try:
            f.add_rule(deny, rule.call, *held)
        except (OSError, RuntimeError, ValueError):
            continue  # a call this architecture does not have (umount, socketcall on x86_64)
    fd = os.memfd_create("owl-seccomp", os.MFD_CLOEXEC)
    try:
        with open(fd, "w+b", closefd=False) as out:
            f.export_bpf(out)
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
