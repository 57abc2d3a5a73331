"""A Policy as a bubblewrap argv; whether bwrap is here and works (asked once).

The argv is laid in the order mounts must be made: the read-only root, the
private /dev, /proc, /tmp and /dev/shm, what must stay readable under a hidden
or private folder, the hidden paths (an empty tmpfs for a folder, /dev/null for
a file: a tmpfs target must exist), the Job's git store read-only (it lies in
Owl's hidden folder), the writable binds, and the read-only binds laid over
them (the project's git folder, the store's top), the host sockets opened on
purpose, and /dev/null over every other host socket still in sight (``/run``
and ``/var/run`` are the Run's own, empty but for their symlinks and the
resolver's file). ``/tmp`` and ``/dev/shm`` are bounded (``--size``): a full
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
import subprocess
from collections.abc import Callable

from .folders import SYSTEM_READ
from .policy import Policy

INSTALL_HINT = "sudo apt install bubblewrap"


def kind(path: str) -> str | None:
    """ "dir", "file" or None (missing); symlinks followed."""
    if os.path.isdir(path):
        return "dir"
    if os.path.exists(path):
        return "file"
    return None


def _command_folders(command: list[str]) -> list[str]:
    """The folders under /tmp that the command itself lives in (its program, a
    virtual environment's root, a script): the Run's /tmp is its own, empty one,
    so without them a command kept under /tmp could not start inside."""
    out: list[str] = []
    for i, arg in enumerate(command):
        if not arg.startswith("/tmp/") or not os.path.exists(arg):
            continue
        folder = os.path.dirname(arg)
        for path in (os.path.dirname(folder) if i == 0 else None, folder):
            if path and path.startswith("/tmp/") and path not in out:
                out.append(path)
    return out


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
    if policy.read_root == "home":
        out += ["--ro-bind", "/", "/"]
    else:
        for top in SYSTEM_READ:
            if exists(top) == "dir":
                out += ["--ro-bind", top, top]
    size = ["--size", str(policy.tmp_size)] if sizes and policy.tmp_size > 0 else []
    out += ["--dev", "/dev", "--proc", "/proc", *size, "--tmpfs", "/tmp"]
    out += [*size, "--tmpfs", "/dev/shm"]
    for path in policy.private:
        out += ["--tmpfs", path]
    for path, target in policy.private_links:
        out += ["--symlink", target, path]
    for path in policy.private_files:
        out += ["--ro-bind", path, path]
    for path in _command_folders(command):  # the Run's own command stays reachable
        out += ["--ro-bind", path, path]
    for path in policy.readable:
        if exists(path):
            out += ["--ro-bind", path, path]
    for path in policy.hidden:
        k = exists(path)
        if k == "dir":
            out += ["--tmpfs", path]
        elif k == "file":
            out += ["--ro-bind", "/dev/null", path]
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
    for path in policy.masked:  # last: over whatever bind made them visible
        if exists(path):  # gone since it was listed: bwrap could not lay anything there
            out += ["--ro-bind", "/dev/null", path]
    if policy.network == "none":
        out.append("--unshare-net")
    if policy.worktree:
        out += ["--chdir", policy.worktree]
    if term_env is not None:
        command = [term_env, "--default-signal=TERM", "--", *command]
    return [*out, "--", *command]


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
