"""A Policy as a bubblewrap argv; whether bwrap is here and works (asked once).

The argv is laid in the order mounts must be made: the system's own folders
read-only (nothing else of the host's filesystem is in the view), the private
/dev, /proc, /tmp and /dev/shm, ``/var`` and ``/run`` the Run's own (empty but
for their symlinks, ``/var/tmp`` and the resolver's file), the Run's own home
at the person's ``$HOME`` path and what is bound into it (its project's
caches, its agent's state, the git config's copy: ``ownhome``), the
read-only binds (the project and its git folder, the toolchains, the
program's folders, ``sandbox.read``), the Job's git store read-only, the
writable binds, the read-only binds laid over them (the project's git
folder), the host sockets opened on purpose, then the hidden paths (an empty
tmpfs for a folder, /dev/null for a file), after every bind so that none
reveals one, and /dev/null over every host socket still in sight. ``/tmp`` and ``/dev/shm`` are bounded (``--size``): a full
one is ENOSPC for the agent, not a machine out of memory. ``--unshare-pid`` gives
the Run its own PID namespace while its processes keep their host pids seen
from outside, so the reaper, the cgroup and the daemon's sweeps work as before.

SIGTERM is for the agent, not for the sandbox. Owl sends it to every process
of a Run and gives them 5 s; bwrap's outer process (the monitor that passes on
the agent's exit status) has no handler for it, so it would die at once: the
Run would seem to end at TERM, with bwrap's -15 in place of the agent's own
status, and (with its own network) pasta, the agent's network, dies with it.
So the sandbox's own processes start with SIGTERM ignored (``env
--ignore-signal=TERM``, or ``netns.py`` ignoring it) and the agent, inside,
with it back at its default (``env --default-signal=TERM``): bwrap's pid 1
ignores it anyway (the kernel drops a signal without a handler sent to a PID
namespace's init). They stay until the agent and all it started have ended,
and SIGKILL, 5 s later, still ends them.

Capabilities: bwrap drops every one for a Run of another user than root, but
leaves a root's Run all of them (it could unmount what hides a secret). So,
Owl run as root, the Run gets a user namespace of its own and ``--cap-drop
ALL`` (CapEff and the bounding set 0); no_new_privs is set by bwrap for all.
A user namespace made inside (``unshare -Ur``) cannot map its uid and gets no
further: the mounts it would copy are locked to it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable

from .folders import SYSTEM_READ, under
from . import syscalls
from .policy import Policy

INSTALL_HINT = "sudo apt install bubblewrap"
# bwrap's own pid 1 inside runs outside the Run's seccomp filter (bwrap loads it
# just before it execs the command): its memory is closed to the Run, which
# could otherwise write code into it (ptrace and process_vm_writev of pid 1 are
# refused by the filter, ``owl.sandbox.syscalls``; umount2 too, so this stays).
INIT_MEM = ("--ro-bind", "/dev/null", "/proc/1/mem", "--ro-bind", "/dev/null", "/proc/1/task/1/mem")


def kind(path: str) -> str | None:
    """ "dir", "file" or None (missing); symlinks followed."""
    if os.path.isdir(path):
        return "dir"
    if os.path.exists(path):
        return "file"
    return None


def argv(
    policy: Policy,
    command: list[str],
    *,
    exists: Callable[[str], str | None] = kind,
    bwrap: str = "bwrap",
    term_env: str | None = None,
    root: bool = False,
    sizes: bool = True,
) -> list[str]:
    """The bwrap command line that runs ``command`` under ``policy``.

    ``term_env``: an ``env`` that knows ``--default-signal`` (see ``term_env()``):
    the command starts with SIGTERM at its default, whatever bwrap was given.
    ``root``: Owl runs as root, so bwrap would leave the Run every capability
    (it drops them itself only for another user): a user namespace of its own
    and every capability dropped. ``sizes``: this bwrap knows ``--size`` (0.6+).

    The environment is not bwrap's to change: the caller starts it with the
    agent's own (``policy.agent_env``), which bwrap and its pid 1 inside keep."""
    out = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
    if root:
        out += ["--unshare-user-try", "--cap-drop", "ALL"]
    for top in SYSTEM_READ:
        if exists(top) == "dir":
            out += ["--ro-bind", top, top]
    size = ["--size", str(policy.tmp_size)] if sizes and policy.tmp_size > 0 else []
    out += ["--dev", "/dev", "--proc", "/proc", *INIT_MEM, *size, "--tmpfs", "/tmp"]
    out += [*size, "--tmpfs", "/dev/shm"]
    for path in policy.private:
        out += ["--tmpfs", path]
    if "/var" in policy.private:
        out += ["--perms", "1777", "--dir", "/var/tmp"]
    for path, target in policy.private_links:
        out += ["--symlink", target, path]
    for path in policy.private_files:
        out += ["--ro-bind", path, path]
    if policy.own_home:
        out += ["--bind", policy.own_home, policy.home]
    for source, place, rw in policy.own_binds:
        if exists(source):
            out += ["--bind" if rw else "--ro-bind", source, place]
    for path in policy.readable:
        if exists(path):
            out += ["--ro-bind", path, path]
    for path in policy.revealed:
        if path in policy.scratch_top and exists(path) == "dir":
            out += _scratch_top(path)
        elif exists(path):
            out += ["--ro-bind", path, path]
    for path in policy.writable:
        if exists(path):
            out += ["--bind", path, path]
    for path in policy.readonly_over:
        if exists(path):
            out += ["--ro-bind", path, path]
    for path in policy.sockets:  # opened on purpose, wherever they lie
        if exists(path) == "file":
            out += ["--ro-bind", path, path]
    for path in policy.hidden:  # after every bind: nothing laid later reveals one
        k = exists(path)
        if k == "dir":
            out += ["--tmpfs", path]
        elif k == "file":
            out += ["--ro-bind", "/dev/null", path]
    for path in policy.masked:  # last: over whatever bind made them visible
        # gone since it was listed: bwrap could not lay anything there; behind
        # another user's closed folder, root's Run (its capabilities dropped)
        # can no more reach it than bwrap can make its mount point there
        if exists(path) and (not root or searchable(path)):
            out += ["--ro-bind", "/dev/null", path]
    if policy.network == "none":
        out.append("--unshare-net")
    if policy.worktree:
        out += ["--chdir", policy.worktree]
    if term_env is not None:
        command = [term_env, "--default-signal=TERM", "--", *command]
    return [*out, "--", *command]


def searchable(path: str) -> bool:
    """Whether every folder above ``path`` lets this uid through by its mode
    bits alone, as a process without capabilities needs (root's Run)."""
    uid, groups = os.getuid(), {os.getgid(), *os.getgroups()}
    folder = os.path.dirname(path)
    while True:
        try:
            st = os.stat(folder)
        except OSError:
            return False
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
        if folder in ("/", ""):
            return True
        folder = os.path.dirname(folder)


def places_in(
    policy: Policy, home: str, exists: Callable[[str], str | None] = kind
) -> list[tuple[str, bool]]:
    """Every place a bind is laid at inside the Run's own home (path, whether
    a folder), as ``argv`` lays them: Owl makes each first (``ownhome.mend_places``)."""
    if not policy.own_home:
        return []
    pairs = [(s, d) for s, d, _ in policy.own_binds]
    for path in (
        *policy.readable,
        *policy.revealed,
        *policy.writable,
        *policy.readonly_over,
        *policy.sockets,
        *policy.hidden,
    ):
        pairs.append((path, path))
    out: list[tuple[str, bool]] = []
    for source, place in pairs:
        k = exists(source)
        if k and place != home and under(place, home) and (place, k == "dir") not in out:
            out.append((place, k == "dir"))
    return out


def sized(version: str) -> bool:
    """Whether bwrap ``version`` ("0.8") knows ``--size`` (0.6 and later)."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (0, 6)


def ignoring_term(argv: list[str], term_env: str | None) -> list[str]:
    """``argv`` (bwrap's) started with SIGTERM ignored, so the sandbox outlives
    a TERM meant for its agent; as it is without an ``env`` that can."""
    return argv if term_env is None else [term_env, "--ignore-signal=TERM", *argv]


_found: dict[str, tuple[str | None, str]] = {}


def find(fresh: bool = False) -> tuple[str | None, str]:
    """(path of bwrap, "0.8") or (None, why not); asked once, or again when ``fresh``."""
    if fresh or "bwrap" not in _found:
        path = shutil.which("bwrap")
        if path is None:
            _found["bwrap"] = (None, f"bubblewrap is not installed ({INSTALL_HINT})")
        else:
            try:
                said = subprocess.run(
                    check=False, args=[path, "--version"], capture_output=True, text=True, timeout=5
                ).stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                _found["bwrap"] = (None, f"bwrap does not run: {e}")
            else:
                m = re.search(r"(\d+)\.(\d+)", said)
                _found["bwrap"] = (path, f"{m.group(1)}.{m.group(2)}" if m else "?")
    return _found["bwrap"]


_env: dict[str, str | None] = {}


def term_env() -> str | None:
    """The path of an ``env`` that can start a program with SIGTERM ignored or
    at its default (GNU coreutils 8.31+), or None (asked once)."""
    if "env" not in _env:
        path = shutil.which("env")
        ok = False
        if path is not None:
            try:
                ok = (
                    subprocess.run(
                        check=False,
                        args=[path, "--ignore-signal=TERM", "--default-signal=TERM", "true"],
                        capture_output=True,
                        timeout=5,
                    ).returncode
                    == 0
                )
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        _env["env"] = path if ok else None
    return _env["env"]


_probed: dict[str, str | None] = {}


def probe(fresh: bool = False) -> str | None:
    """None when a sandbox can be made here, else why not (asked once, cached;
    ``fresh``: asked again, as ``owl.sandbox.ready`` does while it does not work)."""
    term_env()  # asked here too, so that wrapping a Run starts no process
    (
        syscalls.bpf(False),
        syscalls.bpf(True),
    )  # built here, off the engine's thread, and kept (as wrap asks)
    if fresh or "works" not in _probed:
        path, detail = find(fresh)
        if path is None:
            _probed["works"] = detail
        else:
            try:
                done = subprocess.run(
                    check=False,
                    args=[
                        path,
                        *(["--unshare-user-try", "--cap-drop", "ALL"] if os.getuid() == 0 else []),
                        "--unshare-pid",
                        "--ro-bind",
                        "/",
                        "/",
                        "--dev",
                        "/dev",
                        "--proc",
                        "/proc",
                        "--tmpfs",
                        "/tmp",
                        "--",
                        "/bin/true",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                _probed["works"] = (
                    None
                    if done.returncode == 0
                    else "bwrap cannot make a sandbox here: "
                    + (done.stderr.strip().splitlines() or ["?"])[-1]
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                _probed["works"] = f"bwrap cannot make a sandbox here: {e}"
    return _probed["works"]


def _scratch_top(path: str) -> list[str]:
    """`path` as a writable folder of the Run's own (a tmpfs, gone with it), its
    entries as they are on the host: folders and files bound read-only (the
    writable binds come after), links made again pointing where they point."""
    out = ["--tmpfs", path]
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ["--ro-bind", path, path]
    for name in names:
        full = os.path.join(path, name)
        if os.path.islink(full):
            out += ["--symlink", os.readlink(full), full]
        else:
            out += ["--ro-bind", full, full]
    return out
