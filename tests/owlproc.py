"""The real daemon and the real `owl` command, as subprocesses, for tests.

    with OwlDaemon(tmp_path, config={...}) as d:
        job = d.add("sleep=1 exit=0", project)
        d.machine("idle")
        d.wait_job(job, "review")

The daemon runs with OWL_MACHINE=manual unless told otherwise, so `d.machine
("input")` / `("idle")` / `("battery")` drive the machine through the control
socket; tests of the real input hooks use a virtual display instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import psutil
import tomli_w

from owl.control import client
from owl.errors import NoDaemon
from owl.settings.paths import socket_in
from support.nspids import host_pids

ROOT = Path(__file__).resolve().parent.parent
AGENT = str(ROOT / "tests" / "agents" / "agent.py")
#: The stand-in agent's interpreter: it needs only the standard library, so it
#: starts without `site` (a quarter of the time: the suite starts thousands).
AGENT_PYTHON = [sys.executable, "-S"]
OWL = [sys.executable, "-m", "owl"]
#: What `OwlDaemon.add` passes over the socket; any other flag goes through `owl add`.
ADD_FLAGS = {"--agent", "--attempts"}


def make_project(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    run = lambda *a: subprocess.run(
        ["git", "-C", str(path), *a],
        check=True,  # noqa: E731
        capture_output=True,
    )
    run("init", "-q", "-b", "main")
    run("config", "user.name", "Test")
    run("config", "user.email", "test@example.invalid")
    for name, text in (files or {"README": "a project\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    run("add", "-A")
    run("commit", "-q", "-m", "first")
    return path


def wait_for(
    pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Unmet:
    """A false answer to `wait_for` that carries what was seen, so a timeout
    says it (`wait_for(lambda: ok or Unmet(seen))`)."""

    def __init__(self, seen: object) -> None:
        self.seen = seen

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"unmet: {self.seen!r}"


def all_stopped(pids: list[int]) -> dict[int, str] | Unmet:
    """Each of `pids` stopped: their states, or an `Unmet` with them."""
    states = process_states(pids)
    return states if states and set(states.values()) == {"stopped"} else Unmet(states)


class OwlDaemon:
    """`owl daemon` in a home of its own, asked through the `owl` command."""

    #: The `owl` verb that starts it (a subclass may run `owl tray`).
    argv: tuple[str, ...] = ("daemon",)

    def __init__(
        self,
        home: Path,
        config: dict | None = None,
        *,
        manual: bool = True,
        env: dict[str, str] | None = None,
        agent: bool = True,
    ) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.pids_file = self.home / "agent-pids"
        cfg: dict = {
            "idle": {"after": "1s", "require_ac_power": True},
            "interruption": {"grace_window": "3s"},
        }
        if agent:
            cfg["agents"] = {"script": {"command": [*AGENT_PYTHON, AGENT, "{prompt}"]}}
            cfg["agent"] = {"default": "script"}
        for section, body in (config or {}).items():
            if isinstance(body, dict):
                cfg.setdefault(section, {}).update(body)
            else:
                cfg[section] = body
        if (cfg.get("sandbox") or {}).get("mode", "off") != "off" and (env or {}).get(
            "AGENT_PIDS"
        ) != "":
            self._pids_outside_home(cfg["sandbox"])
        self.write_config(cfg)
        self.env = dict(
            os.environ,
            OWL_HOME=str(self.home),
            AGENT_PIDS=str(self.pids_file),
            PYTHONUNBUFFERED="1",
            OWL_LOG_LEVEL="INFO",
        )
        if manual:
            self.env["OWL_MACHINE"] = "manual"
        self.env.update(env or {})
        self.proc: subprocess.Popen | None = None
        self.log = self.home / "daemon.log"

    def _pids_outside_home(self, sandbox: dict) -> None:
        """A contained Run cannot see OWL_HOME: its agents note their pids in a
        folder beside it, which `sandbox` (the config's table) makes writable."""
        folder = self.home.with_name(self.home.name + "-pids")
        folder.mkdir(exist_ok=True)
        self.pids_file = folder / "agent-pids"
        sandbox["write"] = [*sandbox.get("write", []), str(folder)]

    def write_config(self, cfg: dict) -> None:
        # Runs of the harness are uncontained unless a test asks ([sandbox] in
        # its config, e.g. tests/test_sandbox_daemon.py); a contained Run's
        # agents note their pids in a folder beside OWL_HOME (which they cannot
        # see) that the config makes writable for them.
        cfg = {"sandbox": {"mode": "off"}, **cfg}
        with open(self.home / "config.toml", "wb") as f:
            tomli_w.dump(cfg, f)

    # ------------------------------------------------------------ process

    def start(self, wait: bool = True) -> "OwlDaemon":
        self._spawn()
        if wait:
            wait_for(
                lambda: self._answers() or self._died(),
                timeout=15,
                interval=0.02,
                what=f"{self._name()} to answer",
            )
            self._check_alive()
        return self

    def _answers(self) -> bool:
        try:
            self.ask("ping")
            return True
        except (NoDaemon, OSError, client.DaemonError):
            # DaemonError: just after a daemon is killed, a child it was forking may
            # hold its listening socket until that child's exec, and a ping queued
            # there is dropped unanswered. Not up yet; ask again.
            return False

    def _spawn(self) -> None:
        """Start `owl <argv>` with its output going to the log."""
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [*OWL, *self.argv], env=self.env, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL
            )

    def _name(self) -> str:
        return " ".join(["owl", *self.argv])

    def _died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def _check_alive(self) -> None:
        if self._died():
            raise AssertionError(
                f"{self._name()} exited {self.proc.returncode}:\n{self.log_text()}"
            )

    def keep_pids_in(self, folder: Path) -> None:
        """Have the agents note their pids in `folder` (off a disk a test fills up)."""
        self.pids_file = folder / "agent-pids"
        self.env["AGENT_PIDS"] = str(self.pids_file)

    def stop(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Say where it is stuck: the daemon writes every thread's stack
            # to its log on SIGUSR1.
            size = self.log.stat().st_size if self.log.exists() else 0
            self.proc.send_signal(signal.SIGUSR1)
            wait_for(
                lambda: (
                    self.log.exists()
                    and self.log.stat().st_size > size
                    and "File " in self.log_text()[size:]
                ),
                timeout=5,
                what="the daemon's stacks in its log",
            )
            raise AssertionError(
                f"the daemon did not stop within {timeout:g} s; its "
                f"threads:\n{self.log_text()[size:][-6000:]}"
            ) from None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(5)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> "OwlDaemon":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.kill_leftovers()

    def agent_pids(self) -> list[int]:
        """The host pids the agents noted (a contained one's only while it lives)."""
        try:
            return host_pids(self.pids_file.read_text())
        except FileNotFoundError:
            return []

    def alive_agent_pids(self) -> list[int]:
        alive = []
        for pid in self.agent_pids():
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("AGENT_PIDS") == str(
                    self.pids_file
                ):
                    alive.append(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return alive

    def kill_all(self) -> None:
        """Kill the daemon if it still runs, and every agent it left: the clean-up
        of a test that kills the daemon itself, so need not stop it gracefully."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        self.kill_leftovers()

    def kill_leftovers(self) -> None:
        for pid in self.alive_agent_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # ------------------------------------------------------------ the CLI

    def owl(
        self, *args: str, input: str | None = None, timeout: float = 30.0
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*OWL, *args],
            env=self.env,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
        )

    def ok(self, *args: str) -> str:
        p = self.owl(*args)
        assert p.returncode == 0, f"owl {' '.join(args)} exited {p.returncode}: {p.stderr}"
        return p.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    # What tests poll (status, a Job, the manual machine) goes through the control
    # socket from this process: the same request and the same JSON as `owl ...
    # --json` prints, without an interpreter start per poll. The `owl` command's
    # own output is tested where it is the subject (tests/test_cli*.py).

    @property
    def socket(self) -> Path:
        return socket_in(self.home / "run")

    def ask(self, verb: str, **args: object) -> Any:
        return client.ask(self.socket, verb, args, timeout=30)

    def _asked(self, verb: str, **args: object) -> Any:
        """The daemon's answer; none (it is not running) fails the test, as `ok` does."""
        try:
            return self.ask(verb, **args)
        except NoDaemon as e:
            raise AssertionError(f"{verb}: {e}\n{self.log_text()[-3000:]}") from None

    def status(self) -> dict:
        return self._asked("status")

    def job(self, job_id: int) -> dict:
        return self._asked("jobs.show", id=job_id)

    def add(self, prompt: str, project: Path, *extra: str) -> int:
        """A Job queued, as `owl add --project PROJECT [--agent A] [--attempts N] PROMPT`
        would: over the socket to the daemon this harness started (the command
        starts an interpreter, which thousands of Jobs in the suite need not;
        tests/test_cli*.py run it), else by the command itself."""
        flags = dict(zip(extra[::2], extra[1::2]))
        if self._died() or self.proc is None or len(extra) % 2 or set(flags) - ADD_FLAGS:
            return int(self.ok("add", "--project", str(project), *extra, "--", prompt).strip())
        attempts = flags.get("--attempts")
        job = self._asked(
            "add",
            prompt=prompt,
            project=str(project),
            agent=flags.get("--agent"),
            attempts=None if attempts is None else int(attempts),
        )
        return int(job["id"])

    def machine(self, event: str) -> None:
        self._asked("machine", event=event)

    def run_of(self, job_id: int) -> dict | None:
        for r in self.status()["runs"]:
            if r["job_id"] == job_id:
                return r
        return None

    def wait_run(self, job_id: int, state: str, timeout: float = 15.0) -> dict:
        try:
            return wait_for(
                lambda: (r := self.run_of(job_id)) and r["state"] == state and r,
                timeout,
                what=f"job {job_id}'s Run to be {state}",
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.told_so_far(job_id)}") from None

    def job_state(self, job_id: int) -> str | None:
        """The Job's state as its record says it: one read of the database
        (`jobs.list`), where `job` also runs git for the branch's facts (tens
        of ms of the daemon's time, which a poll every 50 ms would keep busy)."""
        # a page: read by the daemon's own connection (every Job, unpaged, opens
        # one of its own, which a full disk slows down)
        jobs = self._asked("jobs.list", all=True, limit=1000)["jobs"]
        return next((j["state"] for j in jobs if j["id"] == job_id), None)

    def wait_job(self, job_id: int, state: str, timeout: float = 20.0) -> dict:
        """The Job's whole view once it is in `state`. Polled by its record;
        the whole view, which also says what is not recorded yet (a full
        disk), is asked for when the record agrees and once a second."""
        polls = 0

        def there() -> dict | None:
            nonlocal polls
            polls += 1
            if self.job_state(job_id) != state and polls % 20:
                return None
            j = self.job(job_id)
            return j if j["state"] == state else None

        try:
            return wait_for(there, timeout, what=f"job {job_id} to be {state}")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.told_so_far(job_id)}") from None

    def told_so_far(self, job_id: int) -> str:
        """What a timed-out wait shows: the Job as it stands and the daemon's last words."""
        try:
            j = self.job(job_id)
            runs = [(r.get("outcome"), r.get("exit_code")) for r in j.get("runs", [])]
            seen = f"job {job_id}: {j['state']}, runs {runs}"
        except Exception as e:  # the daemon may be what failed
            seen = f"job {job_id}: not read ({e})"
        tail = "\n".join(self.log_text().splitlines()[-40:])
        agent = ""
        try:  # a Run's log may be rotated away meanwhile
            runs_logs = sorted(
                (self.home / "logs").glob("[0-9]*.log"), key=lambda p: p.stat().st_mtime
            )
            if runs_logs:
                lines = runs_logs[-1].read_text(errors="replace").splitlines()[-15:]
                agent = f"\n{runs_logs[-1].name}, last lines:\n" + "\n".join(lines)
        except OSError:
            pass
        return f"{seen}\ndaemon log, last lines:\n{tail}{agent}"


class SocketOwl(OwlDaemon):
    """The real daemon, with Jobs added through the control socket too instead of
    one `owl add` each (fault loops and soaks add thousands). Use OwlDaemon where
    the `owl add` command line is part of what is tested."""

    def start(self, wait: bool = True) -> "SocketOwl":
        self._spawn()

        def up() -> bool:
            self._check_alive()
            return self._answers()

        wait_for(up, timeout=30, interval=0.02, what="the daemon to answer")
        return self

    def add(self, prompt: str, project: Path, *extra: str) -> int:
        attempts = int(extra[extra.index("--attempts") + 1]) if "--attempts" in extra else None
        return self.ask(
            "add",
            prompt=prompt,
            project=str(project),  # type: ignore[no-any-return]
            attempts=attempts,
        )["id"]


def freeze_a_run(d: OwlDaemon, project: Path, prompt: str) -> tuple[int, list[int]]:
    """Add a Job whose agent `prompt` starts one setsid child, run it, then freeze it:
    returns the Job and the pids of its tree, every one of them stopped."""
    job = d.add(prompt, project)
    d.machine("idle")
    d.wait_run(job, "running")
    wait_for(lambda: len(d.agent_pids()) == 2, what="the agent and its setsid child")
    d.machine("input")
    d.wait_run(job, "frozen")
    pids = d.agent_pids()
    wait_for(
        lambda: set(process_states(pids).values()) == {psutil.STATUS_STOPPED},
        what="the whole tree stopped",
    )
    return job, pids


def processes(pids: list[int]) -> list[psutil.Process]:
    """The processes these pids name now, each kept with its start time."""
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return out


def left_running(procs: list[psutil.Process]) -> list[int] | None:
    """The pids of `procs` still running (zombies are not), or None: by each
    process's identity, so that a pid another test's process took since (the
    pid counter wraps here at 32,768) is not counted."""
    left = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return left or None


def process_states(pids: list[int]) -> dict[int, str]:
    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            out[pid] = "gone"
    return out


#: SIGSTOP's bit in /proc/PID/status's pending masks.
_SIGSTOP_BIT = 1 << (signal.SIGSTOP - 1)


def frozen_states(pids: list[int]) -> dict[int, str]:
    """`process_states`, where a process not yet stopped but with a SIGSTOP
    pending reads "stop pending": it acts on the stop before it runs its own
    code again. Such is a parent waiting out its vfork child (pasta forking
    into the background, a `subprocess` start), which the kernel shows as
    disk-sleep until the child, stopped itself, execs or exits; and, on a
    machine too busy to have given it the CPU since, one still runnable."""
    states = process_states(pids)
    for pid, state in states.items():
        waiting = (psutil.STATUS_DISK_SLEEP, psutil.STATUS_RUNNING)
        if state in waiting and _stop_pending(pid):
            states[pid] = "stop pending"
    return states


def _stop_pending(pid: int) -> bool:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    return any(
        line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & _SIGSTOP_BIT
        for line in lines
    )


def stop_daemons(home: Path, timeout: float = 15.0) -> None:
    """Stop every `owl daemon` serving OWL_HOME=home (ones the owl command
    started in the background), so a test leaves none behind."""
    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if (p.info["environ"] or {}).get("OWL_HOME") == str(home) and (p.info["cmdline"] or [])[
                -2:
            ] == ["owl", "daemon"]:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout)
        except psutil.Error:
            pass
