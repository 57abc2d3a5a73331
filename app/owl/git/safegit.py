"""Owl's own git, which never runs a command the repository names.

An agent works as the person. Contained, it writes only its Job's own store
(`owl.git.jobstore`: objects and refs, never its config or hooks); uncontained
(`sandbox.mode = "off"`, a Mac) it can write the repository's config
(`core.fsmonitor = ./payload.sh`), its hooks folder, `info/attributes`, even
`~/.gitconfig`; and a `.gitattributes` is the agent's either way. Any git Owl
runs in that repository would then run the agent's code inside the daemon,
unfrozen and untagged. So every git call Owl makes goes through `run()` (or
`stream()`), which:

- turns off every setting that makes git start a program: hooks
  (`core.hooksPath=/dev/null`), fsmonitor, editors, pagers, askpass and
  credential helpers, remote transports, signing and signature checks,
  automatic gc, submodule recursion; and blanks each filter driver
  (clean/smudge/process) and merge driver the config defines, as listed by
  `configured()` where the call runs (``disarm`` says how, and why so);
- passes `--no-ext-diff --no-textconv` to the commands that diff, and
  `--ignore-submodules=all` to those that would look into a submodule (a
  repository with a config of its own);
- drops the daemon's own `GIT_*` variables, the system config and the
  system and global attributes files;
- starts git under a sweeper, so that nothing it starts outlives it
  (``gitprocess``); the commands that touch refs and objects only, where no
  driver applies, run without the sweeper and without the listing.

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
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import IO, cast
from pathlib import Path

from .disarm import FIXED, argv, environment, objects_only, overrides
from .gitprocess import GitTimeout as GitTimeout
from .gitprocess import end_in_time, end_leftovers, given_input, launch, spawn

TIMEOUT = 60.0

_local = threading.local()
log = logging.getLogger("owl.git")


class OnEngineThread(RuntimeError):
    """git was asked for on the engine thread (see the module docstring)."""


def forbid_here() -> None:
    """Mark the calling thread as one that must never wait on git."""
    _local.forbidden = True


@contextlib.contextmanager
def allowed_here() -> Iterator[None]:
    """git on a thread that forbids it, knowingly: the engine's own, once it is
    stopping (no Run is left to freeze, and no later pass would do the work)."""
    was = getattr(_local, "forbidden", False)
    _local.forbidden = False
    try:
        yield
    finally:
        _local.forbidden = was


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


def _env(settings: list[tuple[str, str]], extra: dict[str, str] | None = None) -> dict[str, str]:
    """git's environment (``disarm.environment``) with this thread's tags (`tagged`)."""
    env = environment(settings, extra)
    env.update(getattr(_local, "env", {}))
    return env


def run(
    cwd: Path | str,
    *args: str,
    timeout: float = TIMEOUT,
    config: tuple[tuple[str, str], ...] = (),
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run git ARGS in `cwd` as the module docstring says; never raises on git's exit status.

    `config`: settings for this call alone, given after the fixed ones (a
    fetch from a Job's store allows the file transport); `env`: variables for
    it alone; `stdin`: what git reads (else nothing). Raises OSError if git
    cannot be started, GitTimeout if it runs past `timeout`."""
    done = run_bytes(cwd, *args, timeout=timeout, config=config, env=env, stdin=stdin)
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def run_bytes(
    cwd: Path | str,
    *args: str,
    timeout: float = TIMEOUT,
    config: tuple[tuple[str, str], ...] = (),
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`run`, its output as git wrote it: what must come back byte for byte
    (a commit's raw object, whose message need not be UTF-8)."""
    _refuse_if_forbidden(args)
    if objects_only(args):
        settings = [*FIXED, *config]
        return spawn(argv(cwd, args), _env(settings, env), timeout, False, stdin)
    settings = [*overrides(configured(cwd, timeout)), *config]
    return spawn(argv(cwd, args), _env(settings, env), timeout, stdin=stdin)


def configured(cwd: Path | str, timeout: float = TIMEOUT) -> list[str]:
    """Every config name git sees in `cwd`, includes and conditional includes
    evaluated there (so run it where the git it guards will run).

    Raises GitTimeout past `timeout`; [] when git cannot list (not a repository:
    then git finds no repository config either)."""
    # No sweeper for this one: `git config --list` reads files and starts nothing.
    listed = spawn(
        argv(cwd, ("config", "--list", "--includes", "--name-only", "-z")),
        _env(list(FIXED)),
        timeout,
        swept=False,
    )
    names = listed.stdout.decode("utf-8", "replace").split("\0")
    return [k for k in names if k] if listed.returncode == 0 else []


class _Reading:
    """git's stdout, noting whether the reader saw its end."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self.ended = False

    def read(self, n: int = -1) -> bytes:
        data = self._pipe.read(n)  # a buffered read: short only at the end
        if n < 0 or len(data) < n:
            self.ended = True
        return data

    def readline(self) -> bytes:
        line = self._pipe.readline()
        self.ended = self.ended or not line
        return line

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


class Stream:
    """A git whose output is read as it comes (`stream`): `stdout` is the pipe;
    `returncode` and `stderr` are set once the block is left."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdout is not None
        self.reading = _Reading(popen.stdout)
        self.stdout = cast(IO[bytes], self.reading)
        self.returncode: int | None = None
        self.stderr = ""
        self.closed_early = False  # the reader stopped before git's output ended


@contextlib.contextmanager
def stream(
    cwd: Path | str,
    *args: str,
    timeout: float = TIMEOUT,
    config: tuple[tuple[str, str], ...] = (),
    env: dict[str, str] | None = None,
    stdin: bytes | IO[bytes] | None = None,
) -> Iterator[Stream]:
    """git ARGS as `run` runs it, its output read from a pipe rather than held.

    For output of any size (a diff of a million files): the reader keeps what
    it needs and may stop at any point; leaving the block closes the pipe, so
    a git still writing ends on SIGPIPE, and its tree is ended as `run` ends
    it. Past `timeout` git is ended even while the reader waits on the pipe.
    Raises OSError if git cannot be started, GitTimeout past `timeout`."""
    _refuse_if_forbidden(args)
    if objects_only(args):
        settings, swept = [*FIXED, *config], False
    else:
        settings, swept = [*overrides(configured(cwd, timeout)), *config], True
    child_env = _env(settings, env)
    with tempfile.TemporaryFile() as err, given_input(stdin) as given:
        popen, tag, mark = launch(argv(cwd, args), child_env, swept, given, subprocess.PIPE, err)
        late = threading.Event()

        def _too_late() -> None:
            late.set()
            end_in_time(popen, tag)

        timer = threading.Timer(timeout, _too_late)
        timer.daemon = True
        timer.start()
        done = Stream(popen)
        try:
            yield done
        finally:
            done.closed_early = not done.reading.ended
            popen.stdout.close()  # type: ignore[union-attr]
            try:
                done.returncode = popen.wait(timeout)
            except subprocess.TimeoutExpired:
                _too_late()
                done.returncode = popen.wait()
            timer.cancel()
            end_leftovers(popen.pid, tag, mark)
            err.seek(0)
            done.stderr = err.read(1 << 16).decode("utf-8", "replace")
    if late.is_set():
        raise GitTimeout(
            f"git {args[0] if args else ''} ran longer than {timeout:g} s and was ended"
        )
