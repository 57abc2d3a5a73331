"""Owl's own git, which never runs a command the repository names.

An agent works as the person, in a worktree whose `.git` is the person's: it
can write the repository's config (`core.fsmonitor = ./payload.sh`), its
hooks folder, `info/attributes`, even `~/.gitconfig`. Any git Owl runs in
that repository would then run the agent's code inside the daemon, unfrozen
and untagged. So every git call Owl makes goes through `run()`, which:

- turns off every setting that makes git start a program: hooks
  (`core.hooksPath=/dev/null`), fsmonitor, editors, pagers, askpass and
  credential helpers, remote transports, signing and signature checks,
  automatic gc, submodule recursion; and blanks each filter driver
  (clean/smudge/process) and merge driver the config defines, found by
  listing the config first (the names are the repository's own);
- passes `--no-ext-diff --no-textconv` to the commands that diff;
- drops the daemon's own `GIT_*` variables and the system config;
- starts git in a session and process tree of its own, and ends that tree
  when git exits or its time is up, so nothing git started outlives it
  (`_end_leftovers`: cheap, since it runs after every call).

None of the person's hooks run for Owl's calls; the person's own git
commands in their checkout are theirs, with their hooks.

And git never runs on the engine thread: that thread freezes Runs when the
person comes back, and a git call can take as long as the repository's size
(or a network filesystem) makes it. The engine marks its thread with
`forbid_here()`; a git call there is a bug, logged with where it came from,
and an error when `OWL_STRICT_THREADS=1` (the tests set it), so the suite
finds every such call rather than a person's slow repository.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from owl import tree
from owl.tree import _platform

TIMEOUT = 60.0
_TAG = "OWL_GIT"
_counter = itertools.count(1)

# Settings that would start a program, each set to a value that does not.
FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("core.sshCommand", "false"),
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("merge.stat", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
)

# <section>.<name>.<key> settings whose value is a command line.
_DRIVER_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "merge": ("driver",),
    "credential": ("helper",),
}
_DIFFING = {"diff", "log", "show"}

_ENV = {
    "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
    "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":", "GIT_PAGER": "cat", "PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_PROTOCOL_FROM_USER": "0", "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}


class GitTimeout(Exception):
    """git ran past its time and its process tree was ended."""


_local = threading.local()
log = logging.getLogger("owl.git")


class OnEngineThread(RuntimeError):
    """git was asked for on the engine thread (see the module docstring)."""


def forbid_here() -> None:
    """Mark the calling thread as one that must never wait on git."""
    _local.forbidden = True


def _refuse_if_forbidden(args: tuple[str, ...]) -> None:
    if not getattr(_local, "forbidden", False):
        return
    what = f"git {args[0] if args else ''} on the engine thread"
    if os.environ.get("OWL_STRICT_THREADS") == "1":
        raise OnEngineThread(what)
    log.warning("%s: it may hold up freezing", what, stack_info=True)


@contextlib.contextmanager
def tagged(**env: str) -> Iterator[None]:
    """Every git this thread runs inside carries these variables too: the
    tags by which its processes are found again (to cancel a setup, or
    after a crash)."""
    before = getattr(_local, "env", {})
    _local.env = {**before, **env}
    try:
        yield
    finally:
        _local.env = before


def overrides(keys: list[str]) -> list[tuple[str, str]]:
    """The fixed settings plus a blank for every command-line driver among `keys`.

    Pure: `keys` are config names as `git config --list --name-only` gives
    them (section and key in lower case, the driver's name as written)."""
    out = list(FIXED)
    for key in keys:
        section, _, rest = key.partition(".")
        name, _, leaf = rest.rpartition(".")
        if not name or section not in _DRIVER_KEYS or leaf not in _DRIVER_KEYS[section]:
            continue
        out.append((key, ""))
        if section == "filter":
            out.append((f"filter.{name}.required", "false"))
    return out


def environment(settings: list[tuple[str, str]]) -> dict[str, str]:
    """The daemon's environment without GIT_*, plus `settings` as GIT_CONFIG_* pairs.

    The pairs go through GIT_CONFIG_COUNT/KEY/VALUE rather than `-c`: a
    driver's name may hold `=`, which `-c` would split on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_ENV)
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def argv(cwd: Path | str, args: tuple[str, ...]) -> list[str]:
    """`git --no-pager -C cwd ARGS`, with diff commands told not to run drivers."""
    rest = list(args)
    if rest and rest[0] in _DIFFING:
        rest[1:1] = ["--no-ext-diff", "--no-textconv"]
    return ["git", "--no-pager", "-C", str(cwd), *rest]


def run(cwd: Path | str, *args: str,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run git ARGS in `cwd` as the module docstring says; never raises on git's exit status.

    Raises OSError if git cannot be started, GitTimeout if it runs past `timeout`."""
    _refuse_if_forbidden(args)
    listed = _spawn(argv(cwd, ("config", "--list", "--name-only", "-z")),
                    environment(list(FIXED)), timeout)
    keys = [k for k in listed.stdout.split("\0") if k] if listed.returncode == 0 else []
    return _spawn(argv(cwd, args), environment(overrides(keys)), timeout)


def _spawn(command: list[str], env: dict[str, str],
           timeout: float) -> subprocess.CompletedProcess[str]:
    env.update(getattr(_local, "env", {}))
    env[_TAG] = f"{os.getpid()}-{next(_counter)}"
    backend = _platform.backend
    mark = backend.last_pid()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with tree.SPAWN_LOCK:
            popen = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, start_new_session=True,
                                     close_fds=True)
            tree.own(popen, locked=True)
        try:
            code = popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with tree.ProcessTree((_TAG, env[_TAG]), popen.pid) as pt:
                pt.kill()
            popen.wait()
            raise GitTimeout(f"git {command[4] if len(command) > 4 else ''} ran longer "
                             f"than {timeout:g} s and was ended") from None
        _end_leftovers(popen.pid, env[_TAG], mark)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _end_leftovers(leader: int, tag: str, mark: int | None) -> None:
    """Kill whatever git started and left behind when it exited.

    Its session (one signal, if anything is left in it), then whatever left
    the session, as a process tree. Only processes started after `mark` are
    read (all of them where the backend cannot tell), and of those the ones
    carrying git's tag, and what they started, are git's. A full sweep of the
    process table after every call would cost a third of a second each on a
    machine running a thousand processes.
    """
    backend = _platform.backend
    last = backend.last_pid()
    since = mark if mark is not None and last is not None and last >= mark else None
    rows = backend.snapshot(since)
    ours = {pid for pid, row in rows.items() if row.sid == leader}
    if ours:
        try:
            os.killpg(leader, signal.SIGKILL)     # the group git led: stopped at once
        except (ProcessLookupError, PermissionError):
            pass
    for pid in rows:
        if pid not in ours and (backend.environ(pid) or {}).get(_TAG) == tag:
            ours.add(pid)
    if not ours:
        return
    pt = tree.ProcessTree((_TAG, tag))
    for pid in ours:
        pt.add_leader(pid)
    with pt:
        pt.kill()
