"""A Policy as a bubblewrap argv; whether bwrap is here and works (asked once).

The argv is laid in the order mounts must be made: the read-only root, the
private /dev, /proc, /tmp and /dev/shm, what must stay readable under a hidden
or private folder, the hidden paths (an empty tmpfs for a folder, /dev/null for
a file: a tmpfs target must exist), the writable binds, and the read-only binds
laid over them (the project's git config, hooks, info). ``--unshare-pid`` gives
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
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable

from .policy import SYSTEM_READ, Policy

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
) -> list[str]:
    """The bwrap command line that runs ``command`` under ``policy``.

    ``term_env``: an ``env`` that knows ``--default-signal`` (see ``term_env()``):
    the command starts with SIGTERM at its default, whatever bwrap was given."""
    out = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
    if policy.read_root == "home":
        out += ["--ro-bind", "/", "/"]
    else:
        for top in SYSTEM_READ:
            if exists(top) == "dir":
                out += ["--ro-bind", top, top]
    out += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
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
    for path in policy.writable:
        if exists(path):
            out += ["--bind", path, path]
    for path in policy.readonly_over:
        if exists(path):
            out += ["--ro-bind", path, path]
    for name in policy.env_unset:
        out += ["--unsetenv", name]
    for name, value in policy.env_set:
        out += ["--setenv", name, value]
    if policy.network == "none":
        out.append("--unshare-net")
    if policy.worktree:
        out += ["--chdir", policy.worktree]
    if term_env is not None:
        command = [term_env, "--default-signal=TERM", "--", *command]
    return [*out, "--", *command]


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
