"""Owl's own git, which never runs a command the repository names.

An agent works as the person. Contained, it writes only its Job's own store
(`owl.git.jobstore`: objects and refs, never its config or hooks); uncontained
(`sandbox.mode = "off"`, a Mac) it can write the repository's config
(`core.fsmonitor = ./payload.sh`), its hooks folder, `info/attributes`, even
`~/.gitconfig`; and a `.gitattributes` is the agent's either way. Any git Owl
runs in that repository would then run the agent's code inside the daemon,
unfrozen and untagged. So every git call Owl makes goes through `run()`, which:

- turns off every setting that makes git start a program: hooks
  (`core.hooksPath=/dev/null`), fsmonitor, editors, pagers, askpass and
  credential helpers, remote transports, signing and signature checks,
  automatic gc, submodule recursion; and blanks each filter driver
  (clean/smudge/process) and merge driver the config defines;
- passes `--no-ext-diff --no-textconv` to the commands that diff, and
  `--ignore-submodules=all` to those that would look into a submodule (a
  repository with a config of its own);
- drops the daemon's own `GIT_*` variables, the system config and the
  system and global attributes files;
- starts git under a sweeper (`owl.tree.SWEEPER`): a child subreaper in a
  session of its own, so whatever git starts stays beneath it however it
  hides (`setsid env -i sleep &` from a driver), and is killed when git
  exits, when its time is up, or when the daemon dies (PR_SET_PDEATHSIG).
  The sweeper is a Python process (some 10 ms, more on a loaded machine), so
  the commands that touch refs and objects only (`_OBJECTS_ONLY`), where no
  driver applies, run without it and without the listing below: git alone,
  in a session whose leftovers `end_leftovers` ends as before.

How the drivers are found, and why so. A driver runs when an attribute
(`filter=x`, `merge=x`) names it and the config gives `filter.x.smudge`
(or `.clean`, `.process`, `merge.x.driver`) a command. Attributes come from
files git 2.39 cannot be told to skip (`info/attributes`, every
`.gitattributes` of the tree being checked out or merged; `--attr-source`
is 2.40+, and leaves `info/attributes` read all the same), so the names an
attribute may use cannot be controlled. The commands can: settings given
in the environment (GIT_CONFIG_COUNT) are read after every file, so a
blank there wins over any file. So every call first lists the config names
git sees (`git config --list --includes`) *in the same directory the call
runs in*, which is what makes conditional includes (`includeIf` gitdir:,
onbranch:, hasconfig:remote.*.url:), `include.path` and a worktree's
`config.worktree` come out as git itself will read them, and blanks every
driver listed. A driver defined nowhere git reads is no driver, whatever
the attributes say.

The one place where git reads config in another directory than the one it
was started in is a git that starts another git elsewhere: `worktree add`
checks the new tree out from inside it (where `includeIf
"gitdir:**/worktrees/**"` applies and the project's checkout sees nothing),
and `worktree remove` without `--force` runs a `git status` inside the tree.
So `owl.git.workspace` adds worktrees with `--no-checkout` and then checks
out with a call made in the new tree, and removes them with `--force` after
its own look for uncommitted changes there.

Rejected: `GIT_CONFIG_GLOBAL` pointing to a file Owl builds. It leaves the
repository's own config (where an agent plants) read as before, and takes
away the person's name for a merge commit; the person's global file is
listed like the rest, so its drivers are blanked too. Rejected: reading the
config files in Python, since only git knows how git evaluates its
includes. Rejected: blanking every name found in an attributes file: the
`.gitattributes` of every tree git may read would have to be found first,
and a name in an attribute is harmless unless the config gives it a
command, which the listing finds. Rejected for now: closing the race below
by showing git a copy of the config in a mount namespace (Linux only, and
the user namespaces it needs are often turned off). What is left: an agent that is live in another Run of the same
project could add a driver in the moment between the listing and git's own
read of its config. What it starts then is still ended with git, by the
sweeper.

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
from typing import IO, cast
from pathlib import Path

from owl import tree


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
    # Attributes name the drivers; the person's (or an agent's) global file is one
    # source fewer to read. The repository's own are read, and their names blanked.
    ("core.attributesFile", os.devnull),
    ("diff.ignoreSubmodules", "all"),
)

# <section>.<name>.<key> settings whose value is a command line.
_DRIVER_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "merge": ("driver",),
    "credential": ("helper",),
}
_DIFFING = {"diff", "log", "show"}
# A submodule is another repository with its own config: never look inside one.
_NO_SUBMODULES = {"diff", "status"}

_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
    "GIT_OPTIONAL_LOCKS": "0",
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


def environment(
    settings: list[tuple[str, str]], extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The daemon's environment without GIT_*, plus `settings` as GIT_CONFIG_* pairs.

    The pairs go through GIT_CONFIG_COUNT/KEY/VALUE rather than `-c`: a
    driver's name may hold `=`, which `-c` would split on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_ENV)
    env.update(extra or {})
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
    if rest and rest[0] in _NO_SUBMODULES:
        rest[1:1] = ["--ignore-submodules=all"]
    return ["git", "--no-pager", "-C", str(cwd), *rest]


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
    if _objects_only(args):
        settings = [*FIXED, *config]
        return _spawn(argv(cwd, args), environment(settings, env), timeout, False, stdin)
    settings = [*overrides(configured(cwd, timeout)), *config]
    return _spawn(argv(cwd, args), environment(settings, env), timeout, stdin=stdin)


# Commands that read or write refs and objects only: no filter or merge driver
# applies to them (the diffs of `log` and `show` are between objects, with
# external diff and textconv off), and whatever else could start a program is
# turned off by FIXED whatever the files say. They need neither the listing
# nor the sweeper, which is what keeps most of Owl's git calls one process.
_OBJECTS_ONLY = frozenset(
    {
        "rev-parse",
        "for-each-ref",
        "update-ref",
        "symbolic-ref",
        "merge-base",
        "rev-list",
        "show-ref",
        "config",
        "log",
        "show",
        "check-attr",
    }
)


def _objects_only(args: tuple[str, ...]) -> bool:
    if not args:
        return False
    if args[0] == "worktree":
        return len(args) > 1 and args[1] in ("list", "prune")
    if args[0] == "cat-file":  # an object as stored, not through a filter or textconv
        return not any(a.startswith(("--textconv", "--filters", "--path")) for a in args)
    return args[0] in _OBJECTS_ONLY


def configured(cwd: Path | str, timeout: float = TIMEOUT) -> list[str]:
    """Every config name git sees in `cwd`, includes and conditional includes
    evaluated there (so run it where the git it guards will run).

    Raises GitTimeout past `timeout`; [] when git cannot list (not a repository:
    then git finds no repository config either)."""
    # No sweeper for this one: `git config --list` reads files and starts nothing.
    listed = _spawn(
        argv(cwd, ("config", "--list", "--includes", "--name-only", "-z")),
        environment(list(FIXED)),
        timeout,
        swept=False,
    )
    names = listed.stdout.decode("utf-8", "replace").split("\0")
    return [k for k in names if k] if listed.returncode == 0 else []


def drivers(keys: list[str]) -> list[str]:
    """The command-line drivers among config names `keys` (`filter.x.smudge`, …)."""
    return [key for key, _ in overrides(keys)[len(FIXED) :] if not key.endswith(".required")]


def _input(
    stdin: bytes | IO[bytes] | None,
) -> contextlib.AbstractContextManager[IO[bytes] | int]:
    """What git reads: `stdin` in a file with no name, or nothing (most calls);
    a file the caller wrote (as large as it likes) is read from where it stands."""
    if stdin is None:
        return contextlib.nullcontext(subprocess.DEVNULL)
    if not isinstance(stdin, bytes):
        return contextlib.nullcontext(stdin)
    given = tempfile.TemporaryFile()
    given.write(stdin)
    given.seek(0)
    return given


def _spawn(
    command: list[str],
    env: dict[str, str],
    timeout: float,
    swept: bool = True,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    # What git reads comes from a file with no name (as its output goes to
    # two): nothing else can swap it under git, as it could a named one in
    # a temporary folder that another program of the person's may write.
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        _input(stdin) as given,
    ):
        popen, tag, mark = _launch(command, env, swept, given, out, err)
        try:
            code = popen.wait(timeout)
        except subprocess.TimeoutExpired:
            _end_in_time(popen, tag)
            raise GitTimeout(
                f"git {command[4] if len(command) > 4 else ''} ran longer "
                f"than {timeout:g} s and was ended"
            ) from None
        end_leftovers(popen.pid, tag, mark)
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        stderr = err.read()
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _launch(
    command: list[str],
    env: dict[str, str],
    swept: bool,
    stdin: IO[bytes] | int,
    stdout: IO[bytes] | int,
    stderr: IO[bytes],
) -> tuple[subprocess.Popen[bytes], str, int | None]:
    """Start git as Owl's own, in a session of its own, tagged so whatever it
    leaves can be found (under the sweeper unless `swept` is False); the
    Popen, its tag and the pid counter's mark before it (`end_leftovers`)."""
    env.update(getattr(_local, "env", {}))
    env[_TAG] = tag = f"{os.getpid()}-{next(_counter)}"
    mark = tree.backend.last_pid()
    command_line, child_env = command, env
    if swept:
        command_line, child_env = tree.helper_command(
            tree.SWEEPER, [str(os.getpid()), *command], env
        )
    with tree.SPAWN_LOCK:
        popen = subprocess.Popen(
            command_line,
            env=child_env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )
        tree.own(popen, locked=True)
    return popen, tag, mark


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
    if _objects_only(args):
        settings, swept = [*FIXED, *config], False
    else:
        settings, swept = [*overrides(configured(cwd, timeout)), *config], True
    child_env = environment(settings, env)
    with tempfile.TemporaryFile() as err, _input(stdin) as given:
        popen, tag, mark = _launch(argv(cwd, args), child_env, swept, given, subprocess.PIPE, err)
        late = threading.Event()

        def _too_late() -> None:
            late.set()
            _end_in_time(popen, tag)

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


def _end_in_time(popen: subprocess.Popen[bytes], tag: str) -> None:
    """A git past its time: the sweeper ends its whole tree; should the sweeper
    itself not answer, its tree is ended from here."""
    with contextlib.suppress(ProcessLookupError):
        popen.terminate()
    try:
        popen.wait(5.0)
        return
    except subprocess.TimeoutExpired:
        pass
    with tree.ProcessTree((_TAG, tag), popen.pid) as pt:
        pt.kill()
    popen.wait()


def end_leftovers(leader: int, tag: str, mark: int | None) -> None:
    """Kill whatever git started and left behind when it exited.

    Its session (one signal, if anything is left in it), then whatever left
    the session, as a process tree. Only processes started after `mark` are
    read (all of them where the backend cannot tell), and of those the ones
    carrying git's tag, and what they started, are git's. A full sweep of the
    process table after every call would cost a third of a second each on a
    machine running a thousand processes.
    """
    backend = tree.backend
    last = backend.last_pid()
    since = mark if mark is not None and last is not None and last >= mark else None
    rows = backend.snapshot(since)
    # git was reaped before this look, so its pid is free again. A process that
    # has it now is another's (on a machine that forks fast the counter comes
    # round in moments): its session and group are its own, and git's session
    # is empty (a session keeps its leader's number from being handed out).
    reused = leader in rows
    ours = set() if reused else {pid for pid, row in rows.items() if row.sid == leader}
    if ours:
        try:
            os.killpg(leader, signal.SIGKILL)  # the group git led: stopped at once
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
