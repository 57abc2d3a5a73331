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
  are locked.

Each is refused with EPERM, as a process without the right gets it, so a tool
that probes goes on. The filter holds the native architecture and its 32-bit
companions (i386 and x32 on x86_64, arm on aarch64), so no other calling
convention goes around it. It is the same for every Run: built once, in a
fraction of a millisecond, and kept (``bpf``).
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
)
IOCTLS = (TIOCSTI, TIOCLINUX)  # ioctl(fd, request): request is argument 1
OF_INIT = (("ptrace", 1), ("process_vm_readv", 0), ("process_vm_writev", 0))  # (call, pid's arg)
COMPANIONS = {"x86_64": ("x86", "x32"), "aarch64": ("arm",)}

INSTALL_HINT = "sudo apt install python3-seccomp"


@dataclass(frozen=True)
class Rule:
    """One refusal: a system call, and (arg, value) compared on its low 32 bits."""

    call: str
    arg: tuple[int, int] | None = None


def rules() -> Iterator[Rule]:
    """Every refusal of the filter, as data (the tests read the same list)."""
    for call in ALWAYS:
        yield Rule(call)
    for request in IOCTLS:
        yield Rule("ioctl", (1, request))
    for call, arg in OF_INIT:
        yield Rule(call, (arg, INIT))


@functools.cache
def bpf() -> bytes | str:
    """The filter as the BPF program bwrap's ``--seccomp`` reads, or why there
    is none (libseccomp's Python binding missing), with what fixes it."""
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
    for rule in rules():
        try:
            if rule.arg is None:
                f.add_rule(deny, rule.call)
            else:
                arg, value = rule.arg
                f.add_rule(deny, rule.call, seccomp.Arg(arg, seccomp.MASKED_EQ, LOW32, value))
        except (OSError, RuntimeError, ValueError):
            continue  # a call this architecture does not have (umount on x86_64)
    fd = os.memfd_create("owl-seccomp", os.MFD_CLOEXEC)
    try:
        with open(fd, "w+b", closefd=False) as out:
            f.export_bpf(out)
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
