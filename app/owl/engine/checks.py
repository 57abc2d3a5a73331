"""Checks: the shell lines a project declares in `.owl.toml` to gate `review`.

A check runs in the Job's worktree as `/bin/sh -c RUN`, in a process tree of
its own started through `owl.tree.spawn` (new session, low priority, tagged
with OWL_RUN_ID), so the engine freezes, thaws and ends it exactly as it does
an agent. When a check runs and how its Run moves on is the lifecycle core's
business (`StartCheck`); this module only starts one, keeps its output, and
says what happened in words.

Output. A check writes into a pipe that Owl copies into
`logs/<run>.check-<i>.log` (`owl.engine.logpipe`, as an agent's output). A test
suite that prints megabytes must not fill the disk, and only its end says why
it failed, so the file is kept within LOG_CAP as it is written (past it the
log becomes `<log>.1` and a new one begins) and compacted to its last
LOG_CAP bytes when it ends. The
database keeps the last OUTPUT_TAIL bytes for `owl jobs show`, and the next
Run's prompt quotes the last NOTE_LINES lines of a failed check.

`owl jobs verify` runs the same checks on demand (`Verification`): the
person asked for it and is at the machine, so those are not frozen (like a
Run started by `owl start`), but each keeps its timeout, and they end with
the daemon.
"""

from __future__ import annotations


import logging
import os
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from owl import tree
from owl.logspan import read_head
from owl.engine import logpipe
from owl.engine.containing import setup_failed
from owl.rules.jobrules import SANDBOX_FAILED
from owl.sandbox import raced as sandbox_raced
from owl.settings.project import Check

log = logging.getLogger("owl.checks")

SHELL = "/bin/sh"
LOG_CAP = 1024 * 1024  # bytes of a check's output kept on disk
OUTPUT_TAIL = 16 * 1024  # bytes kept in the database and shown by `owl jobs show`
NOTE_LINES = 40  # lines of a failed check quoted into the next prompt
NOTE_CHARS = 4000


@dataclass
class Result:
    """One check's outcome, as the store and the views take it."""

    position: int
    name: str
    command: str
    outcome: str  # "passed", "failed" or "interrupted"
    exit_code: int | None
    duration_s: float | None
    output: str
    log: str | None = None
    python3: str | None = None  # what `python3` was on the check's PATH ("" none)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def row(self) -> dict[str, Any]:
        """Its fields as `Store.add_check` takes them, beside whose check it was."""
        return asdict(self)


def log_path(logs: Path, run_or_tag: int | str, index: int) -> Path:
    return Path(logs) / f"{run_or_tag}.check-{index}.log"


def python3_of(env: dict[str, str]) -> str:
    """The `python3` a check's shell finds on its PATH ("" when none), said in its
    log and by `owl jobs show`: the first thing to look at when "No module named
    pytest" means the wrong interpreter, not the wrong project."""
    found = shutil.which("python3", path=env.get("PATH", os.defpath))
    if found is None:
        return ""
    real = os.path.realpath(found)
    return found if real == found else f"{found} (→ {real})"


def env_for(
    base: dict[str, str], check: Check, index: int, worktree: Path, tags: dict[str, str]
) -> dict[str, str]:
    """The check's environment: the daemon's own plus the Run's tags.

    OWL_RUN_ID is how a crash recovery finds a check's survivors, as it does
    an agent's; OWL_CHECK lets a check's script know it is one."""
    env = dict(base)
    env.update(tags)
    env.update(
        {"OWL_CHECK": check.name, "OWL_CHECK_INDEX": str(index), "OWL_WORKTREE": str(worktree)}
    )
    return env


# A check's command (and its environment) as it starts contained, as the Run's
# agent was, with the host sockets its sandbox covers (`owl.sandbox.raced`): a
# check runs the project's tests, and the agent wrote them. Its third
# argument: a file of Owl's where the sandbox says it failed at its own start
# (`CheckProcess.sandbox_failed`). Raises OSError (so the check fails, saying
# why) when it must be contained and cannot be.
Contain = Callable[
    [list[str], dict[str, str], Path], tuple[list[str], dict[str, str], tuple[str, ...]]
]


class CheckProcess:
    """One check started in its own process tree, writing to its own log."""

    def __init__(
        self,
        check: Check,
        index: int,
        *,
        worktree: Path,
        env: dict[str, str],
        log_file: Path,
        tag: tuple[str, str] | None,
        nice: int = 10,
        contain: Contain | None = None,
    ) -> None:
        self.check = check
        self.index = index
        self.log_path = Path(log_file)
        self.size = 0
        self.started = time.monotonic()
        for stale in (self.log_path, _older(self.log_path)):
            try:
                stale.unlink()
            except FileNotFoundError:
                pass
        # Its output passes through Owl, so the cap holds as it is written.
        self.sink = logpipe.Sink(self.log_path, LOG_CAP)
        self.python3 = python3_of(env)
        # Said at the head of its log; kept out of its output (the reason a
        # failed check gives is its own last line, not Owl's).
        self.header = f"owl: python3 on this check's PATH: {self.python3 or 'none'}\n".encode(
            "utf-8", "replace"
        )
        os.write(self.sink.fd, self.header)
        self.masked: tuple[str, ...] = ()  # the host sockets its sandbox covers
        # where bwrap says it failed at its own start (none: not contained)
        self.setup_report: Path | None = None
        self._setup_words: str | None = None
        try:
            argv, start_env = [SHELL, "-c", check.run], env
            if contain is not None:
                self.setup_report = self.log_path.with_name(self.log_path.name + ".setup")
                self.setup_report.unlink(missing_ok=True)  # an earlier start's
                argv, start_env, self.masked = contain(argv, env, self.setup_report)
            self.popen = tree.spawn(
                argv,
                cwd=str(worktree),
                env=start_env,
                stdout=self.sink.fd,
                stderr=self.sink.fd,
                nice=nice,
                reaper=True,
            )
        except OSError:
            self.sink.close()
            raise
        self.sink.started()
        self.tree = tree.ProcessTree(tag, self.popen.pid, nice=nice)

    def sandbox_failed(self, code: int | None) -> str | None:
        """bwrap's own words when the check's sandbox failed at its own start,
        before its command ran, by bwrap's own account (its status fd, read by
        netns.py outside the sandbox, which then wrote `setup_report`), never by
        words the command could print; else None. Read once."""
        if self.setup_report is None or code in (None, 0):
            return None
        if self._setup_words is None:
            head = read_head(self.log_path, len(self.header))
            self._setup_words = setup_failed(self.setup_report, head, code) or ""
        return self._setup_words or None

    def raced(self, code: int | None) -> str | None:
        """The covered socket whose going away failed its sandbox's set-up, if
        that is how it ended (`owl.sandbox.raced`): only when bwrap says its
        set-up failed."""
        if not self.masked or self.sandbox_failed(code) is None:
            return None
        lines = read_head(self.log_path, len(self.header))
        return sandbox_raced.raced(lines, self.masked)

    def settle(self) -> None:
        """Wait (on the check's own thread) until its output so far is in the log."""
        self.sink.settle()

    def trim(self) -> bool:
        """Whether the check wrote anything since the last call (the sink keeps
        the log within LOG_CAP as it writes)."""
        seen = self.sink.received
        grew = seen > self.size
        self.size = seen
        return grew

    def finish(
        self,
        outcome: str,
        exit_code: int | None,
        duration_s: float | None,
        owl_said: str | None = None,
    ) -> Result:
        """Close the log, compact it to its tail, and say what happened
        (``owl_said``: Owl's own line at its head, as a sandbox that failed at
        its own start has)."""
        self.sink.settle(timeout=0.05)  # settled on its own thread already: a last look
        self.sink.close()
        data = compact(self.log_path)
        if data.startswith(self.header):
            data = data[len(self.header) :]
        if owl_said is not None:
            data = f"owl: {owl_said}\n".encode("utf-8", "replace") + data
        return Result(
            self.index,
            self.check.name,
            self.check.run,
            outcome,
            exit_code,
            None if duration_s is None else round(duration_s, 2),
            _text(data[-OUTPUT_TAIL:]),
            str(self.log_path),
            self.python3,
        )


def _older(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def compact(path: Path) -> bytes:
    """Join `<log>.1` and the log, keep the last LOG_CAP bytes in the log; return them."""
    older = _older(path)
    data = b""
    for part in (older, path):
        try:
            data += part.read_bytes()
        except FileNotFoundError:
            pass
    data = data[-LOG_CAP:]
    try:
        path.write_bytes(data)
        older.unlink(missing_ok=True)
    except OSError as e:
        log.warning("could not compact %s: %s", path, e)
    return data


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# ------------------------------------------------------------------- words


def failure_note(result: dict[str, Any] | Result) -> str:
    """What the next Run's prompt says about a failed check: name, command, output tail."""
    r = result if isinstance(result, dict) else result.__dict__
    name, command, code = r["name"], r["command"], r.get("exit_code")
    lines = (r.get("output") or "").rstrip("\n").splitlines()[-NOTE_LINES:]
    tail = "\n".join(lines)[-NOTE_CHARS:]
    if r.get("outcome") == "failed" and code is None:
        how = "ran longer than its timeout"
    elif code == 127:
        how = "failed: command not found (exit 127)"
    else:
        how = f"failed with exit code {code}"
    return (
        f'The check "{name}" {how}. Owl runs the project\'s checks in the '
        "worktree after the agent exits; every check must pass before the work "
        f"goes to review.\nCommand: {command}\n"
        + (f"Last lines of its output:\n{tail}" if tail else "It printed nothing.")
    )


def last_line(output: str) -> str:
    """The last non-empty line of a check's output, for a one-line reason."""
    for line in reversed(output.splitlines()):
        if line.strip():
            return line.strip()[:200]
    return ""


def review_message(job_id: int, passed: int) -> str:
    if passed == 0:
        return f"Job {job_id} ready for review — not verified (the project declares no checks)"
    return f"Job {job_id} ready for review — {passed} check{'s' if passed != 1 else ''} passed"


def view(row: dict[str, Any]) -> dict[str, Any]:
    """A stored check as `owl jobs show --json` gives it."""
    return {
        "name": row["name"],
        "run": row["command"],
        "passed": row["outcome"] == "passed",
        "outcome": row["outcome"],
        "exit_code": row["exit_code"],
        "duration_s": row["duration_s"],
        "output": row["output"],
        "log": row["log"],
        "python3": row.get("python3"),
        "source": row.get("source"),
    }


# --------------------------------------------------------- `owl jobs verify`


class Verification:
    """The checks of one Job run again on demand, one after another, on a thread.

    `record(result)` is called for each check as it ends (from this thread);
    `done(results)` once at the end. `cancel()` ends what runs (Term, then
    Kill 5 s later) and starts nothing more."""

    def __init__(
        self,
        job_id: int,
        checks: tuple[Check, ...],
        *,
        worktree: Path,
        logs: Path,
        env: dict[str, str],
        nice: int,
        record: Callable[[Result], None],
        done: Callable[[list[Result]], None],
        contain: Contain | None = None,
    ) -> None:
        self.job_id = job_id
        self.checks = checks
        self.contain = contain
        self.worktree = Path(worktree)
        self.logs = Path(logs)
        self.env = env
        self.nice = nice
        self.record = record
        self.done = done
        self.batch = f"verify-{job_id}-{time.time_ns()}"
        self._cancelled = threading.Event()
        self._current: CheckProcess | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, daemon=True, name=f"owl-verify-{job_id}")

    def start(self) -> None:
        self._thread.start()

    def cancel(self, wait: float = 7.0) -> None:
        """End what runs and start nothing more; wait up to `wait` s (0: do not wait)."""
        self._cancelled.set()
        with self._lock:
            cur = self._current
        if cur is not None:
            threading.Thread(target=_end, args=(cur,), daemon=True).start()
        if wait:
            self._thread.join(wait)

    def _main(self) -> None:
        results: list[Result] = []
        try:
            for i, check in enumerate(self.checks):
                if self._cancelled.is_set():
                    break
                result = self._one(i, check)
                results.append(result)
                self.record(result)
                if not result.passed:
                    break
        except Exception:  # pragma: no cover - a bug; say so and end
            log.exception("verification of job %s failed", self.job_id)
        finally:
            self.done(results)

    def _one(self, i: int, check: Check) -> Result:
        """Check `i`, run to its end; a start its sandbox lost to a host socket
        going away (`owl.sandbox.raced`) is made again at once, as a Run's
        check's is, at most `AGAIN_MOST` times, and is no verdict; the start
        after those is judged as it ends, as a Run's check's is."""
        for _ in range(sandbox_raced.AGAIN_MOST):
            result, gone = self._try(i, check)
            if gone is None:
                return result
            words = sandbox_raced.again_words(gone)
            log.info("job %s: check %s (%s) on demand: %s", self.job_id, i + 1, check.name, words)
        return self._try(i, check, last=True)[0]

    def _try(self, i: int, check: Check, last: bool = False) -> tuple[Result, str | None]:
        """One start of check `i`: its result, or (when its sandbox lost the
        race with the host, and it is not the `last` start) the socket that
        went away, nothing to record."""
        tag = f"verify-{self.job_id}"
        env = env_for(
            self.env, check, i, self.worktree, {"OWL_JOB_ID": str(self.job_id), "OWL_VERIFY": tag}
        )
        try:
            cp = CheckProcess(
                check,
                i,
                worktree=self.worktree,
                env=env,
                log_file=log_path(self.logs, tag, i),
                tag=("OWL_VERIFY", tag),
                nice=self.nice,
                contain=self.contain,
            )
        except OSError as e:
            why = f"the check could not be started: {e}"
            return Result(i, check.name, check.run, "failed", None, 0.0, why), None
        with self._lock:
            self._current = cp
        timed_out = False
        while True:
            try:
                code = cp.popen.wait(timeout=0.5)
                cp.settle()
                break
            except subprocess.TimeoutExpired:
                cp.trim()
                if time.monotonic() - cp.started >= check.timeout and not timed_out:
                    timed_out = True
                    _end(cp)
        # what it left behind goes the same way as a Run's leftovers
        if cp.tree.alive():
            _end(cp)
        with self._lock:
            self._current = None
        duration = time.monotonic() - cp.started
        if self._cancelled.is_set():
            outcome = "interrupted"
        elif timed_out:
            outcome, code = "failed", None
        else:
            outcome = "passed" if code == 0 else "failed"
        gone = cp.raced(code) if outcome == "failed" and code != 0 and not last else None
        if gone is not None:  # its log closed, its result recorded nowhere
            return cp.finish("interrupted", None, None), gone
        if outcome == "failed" and (words := cp.sandbox_failed(code)) is not None:
            return cp.finish("interrupted", code, duration, f"{SANDBOX_FAILED}: {words}"), None
        return cp.finish(outcome, code, duration), None


def _end(cp: CheckProcess) -> None:
    """Term, then Kill what is left 5 s later (the lifecycle's own promise)."""
    cp.tree.term()
    deadline = time.monotonic() + 5.0
    while cp.tree.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if cp.tree.alive():
        cp.tree.kill()
