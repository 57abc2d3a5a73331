"""The daemon: wires the engine, the machine, the control socket; start, stop, recovery.

Start-up refuses early and in one line when it cannot do its job: a config
that does not check, a database it cannot use, another daemon on the same
OWL_HOME (named by pid). Then it cleans up after a crash before anything new
starts: every Run the database still calls open is closed `interrupted`, its
Job goes back to `pending` in its place, and every process that survived the
crash (found by its recorded identity, or by `OWL_RUN_ID` plus this home's
instance tag) is killed.

Stopping (SIGTERM, SIGINT, Quit in the tray) ends every live Run through the
lifecycle's own path (Term, then Kill 5 s later) and returns within about 6 s.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any

from owl import bounds
from owl import config as configmod
from owl import tree, verbwork, views, watchdog
from owl.control import args as control_args
from owl.engine import Engine
from owl.errors import Refused, StoreError
from owl.paths import Paths, get_paths
from owl.store import Store

log = logging.getLogger("owl.daemon")

CRASH_REASON = watchdog.CRASH_REASON
LOCK_WAIT = 15.0          # how long a start waits for a dead daemon's watchdog


class StartupError(Exception):
    """The daemon will not start; str() is one line saying why."""


class Daemon:
    def __init__(self, paths: Paths | None = None) -> None:
        self.paths = paths or get_paths()
        self._lock_fd: int | None = None
        self.server = None
        self.engine: Engine | None = None
        self.store: Store | None = None
        self.guard: watchdog.Guard | None = None
        self._no_nap: Any = None            # macOS: the App Nap opt-out (power.appnap)

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        paths = self.paths
        try:
            cfg = configmod.load(paths.config)
        except configmod.ConfigError as e:
            raise StartupError(str(e)) from None
        paths.ensure()
        self._take_lock()
        try:
            self.store = Store(paths.db)
        except StoreError as e:
            raise StartupError(str(e)) from None
        instance = self.store.setting("instance")
        if not instance:
            instance = uuid.uuid4().hex
            self.store.set_setting("instance", instance)
        tree.become_subreaper()
        self._recover(instance)
        self.engine = Engine(store=self.store, paths=paths, cfg=cfg, machine=self._machine(),
                             inhibitor=self._inhibitor(cfg), instance=instance)
        from owl.control.server import Server

        self.server = Server(paths.socket, self.dispatch)
        try:
            self.server.listen()
        except OSError as err:
            self.engine = None
            raise StartupError(f"cannot listen on {paths.socket}: {err}") from None
        self._no_nap = _no_app_nap()
        # Before any Run starts: should this process die, the guard ends its Runs.
        self.guard = watchdog.start(paths.db, paths.runtime / "owl.lock", instance, paths.logs)
        self.engine.start()
        log.info("owl daemon %s started (pid %s, home %s)", instance[:8], os.getpid(),
                 paths.db.parent)

    def _take_lock(self) -> None:
        lock = self.paths.runtime / "owl.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                os.lseek(fd, 0, os.SEEK_SET)
                other = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                # The daemon named in the file is dead, yet the lock is held:
                # its watchdog is ending its Runs. Wait for that, then start.
                if not _alive(other) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                os.close(fd)
                raise StartupError(f"another Owl daemon is already running for "
                                   f"{self.paths.db.parent} (pid {other})") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _recover(self, instance: str) -> None:
        assert self.store is not None
        watchdog.recover(self.store, instance, self.paths.logs)

    def _machine(self) -> Any:
        from owl.machine import ManualMachine

        if os.environ.get("OWL_MACHINE") == "manual":
            return ManualMachine()
        try:
            from owl.machine import RealMachine

            # idle.after as the engine has it now (edits apply without a restart).
            return RealMachine(after=lambda: self.engine.cfg.idle_after)
        except Exception as e:  # no backend at all: the machine cannot be read
            log.warning("idle detection unavailable: %s", e)
            return _Unreadable(str(e))

    def _inhibitor(self, cfg: configmod.Config) -> Any:
        try:
            from owl.power import make_inhibitor
        except ImportError:
            return None
        try:
            return make_inhibitor(cfg.keep_awake)
        except Exception as e:
            log.warning("cannot keep the machine awake: %s", e)
            return None

    # ------------------------------------------------------------------- stop

    def request_stop(self) -> None:
        if self.engine is not None:
            threading.Thread(target=self.engine.stop, daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        assert self.engine is not None
        return self.engine.wait_stopped(timeout)

    def close(self) -> None:
        if self.engine is not None and not self.engine.stopped:
            self.engine.stop()
        if self.server is not None:
            self.server.close()
        if self.store is not None:
            self.store.close()
        if self.guard is not None:
            # Every Run ended: the guard may go. If not, closing our end
            # without the clean word makes it end what is left.
            if self.engine is None or (self.engine.stopped and not self.engine.live):
                self.guard.release()
            else:
                self.guard.abandon()
            self.guard = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._no_nap is not None:
            self._no_nap.end()
            self._no_nap = None

    # -------------------------------------------------------------- interface

    def status(self) -> dict:
        assert self.engine is not None
        return self.engine.call(self.engine.status)

    def call(self, verb: str, **args: Any) -> Any:
        return self.dispatch(verb, args)

    def dispatch(self, verb: str, args: dict[str, Any]) -> Any:
        """Every verb the socket and the tray may ask; runs on the engine thread."""
        e = self.engine
        assert e is not None
        A = control_args       # each argument checked for its kind and bounds
        if verb in ("jobs.review", "review"):
            # Reads the database and git only, on the caller's thread: a large
            # branch's diff must not hold up the supervisor.
            from owl.review import write_page

            key = "id" if "id" in args else "job_id"
            return {"path": str(write_page(self.paths, A.ident(args, key)))}
        if verb in _STARTS_RUNS:
            _catch_up_config(e)
        prepared: dict = {}
        if verb == "add":
            # The project is read (git, .owl.toml) here, on the caller's thread.
            from owl.verbs import check_prompt

            A.attempts(args)
            check_prompt(A.text(args, "prompt"))
            prepared = verbwork.prepare_add(e.cfg, A.text(args, "prompt"),
                                            A.text(args, "project"),
                                            A.optional_text(args, "agent"))
        table = {
            "status": lambda: e.status(),
            "add": lambda: e.verbs.add_prepared(prepared, A.attempts(args)),
            "jobs.list": lambda: views.jobs_list(e.store, A.flag(args, "all")),
            "jobs.show": lambda: e.job_view(A.ident(args, "id")),
            "jobs.drop": lambda: verbwork.drop(e, A.ident(args, "id"), A.flag(args, "force")),
            "drop": lambda: verbwork.drop(e, A.ident(args, "job_id"), A.flag(args, "force")),
            "accept": lambda: verbwork.accept(e, A.ident(args, "job_id"), A.flag(args, "merge"),
                                              False),
            "verify": lambda: verbwork.verify(e, A.ident(args, "job_id")),
            "jobs.accept": lambda: verbwork.accept(e, A.ident(args, "id"), A.flag(args, "merge"),
                                                   A.flag(args, "delete_branch")),
            "jobs.extend": lambda: e.verbs.extend(A.ident(args, "id"), A.attempts(args)),
            "jobs.move": lambda: e.verbs.move(A.ident(args, "id"), A.ident(args, "position")),
            "jobs.reply": lambda: e.verbs.reply(A.ident(args, "id"), A.text(args, "text"),
                                          A.flag(args, "first")),
            "jobs.verify": lambda: verbwork.verify(e, A.ident(args, "id")),
            "start": lambda: e.verbs.start_now(),
            "pause": lambda: e.verbs.pause(),
            "resume": lambda: e.verbs.resume(),
            "stop": lambda: e.verbs.stop_runs(A.flag(args, "force")),
            "machine": lambda: e.machine_event(A.text(args, "event")),
            "shift.start": lambda: e.verbs.shift_start(A.seconds(args, "for_s", 3600.0,
                                                           bounds.MAX_SHIFT_S),
                                                 A.flag(args, "until_empty"),
                                                 A.flag(args, "require_power"),
                                                 A.flag(args, "replace")),
            "shift_start": lambda: e.verbs.shift_start(A.seconds(args, "for_s", 3600.0,
                                                           bounds.MAX_SHIFT_S),
                                                 False, False, False),
            "shift.stop": lambda: e.verbs.shift_stop(),
            "shift.status": lambda: e.shift_view(),
            "ping": lambda: {"pid": os.getpid()},
        }
        if verb in _IN_HALVES:
            return table[verb]()          # their git runs here, between engine calls
        fn = table.get(verb)
        if fn is None:
            raise Refused(f"unknown verb {verb!r}")
        return verbwork.finish(e.call(fn))


# Verbs whose git comes between two looks at the state: `owl.verbwork` strings
# their halves together on the caller's thread, calling the engine for each.
_IN_HALVES = frozenset({"drop", "jobs.drop", "accept", "jobs.accept", "verify", "jobs.verify"})

# Verbs that may start a Run at once (or queue one that does): a config edit
# saved just before them must be in force for that Run.
_STARTS_RUNS = frozenset({"add", "start", "resume", "jobs.extend", "jobs.reply"})


def _catch_up_config(e: Engine) -> None:
    """Look at the config file now, on the caller's thread (the watch looks
    only every second), and if it changed let the engine take the edit in
    before this verb: its queue is in order, so one round trip does."""
    watch = getattr(e, "config_watch", None)
    if watch is not None and watch.look(wait=1.0):
        e.call(lambda: None)


class _Unreadable:
    """The machine when no idle backend could be loaded at all."""

    def __init__(self, problem: str) -> None:
        from owl.machine import Reading

        self._reading = Reading(idle_for=None, on_ac=None, problem=problem)

    def start(self, on_input: Any, on_change: Any = None) -> None:
        pass

    def stop(self) -> None:
        pass

    def read(self) -> Any:
        return self._reading


def _no_app_nap() -> Any:
    """macOS: keep the watch and kill timers on time in a windowless app."""
    try:
        from owl.power.appnap import begin

        return begin()
    except Exception as e:      # never a reason not to start
        log.warning("cannot opt out of App Nap: %s", e)
        return None


def _alive(pid: str) -> bool:
    """Whether the process a lock file names is still running (not a zombie)."""
    import psutil

    try:
        return psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE
    except (ValueError, psutil.Error):
        return False


# Job-control stops from a terminal: a Ctrl-Z must not stop the supervisor
# with Runs frozen. (SIGSTOP cannot be ignored; the watchdog covers that.)
TERMINAL_STOPS = ("SIGTSTP", "SIGTTIN", "SIGTTOU")


def ignore_terminal_stops() -> None:
    """Ignore SIGTSTP, SIGTTIN and SIGTTOU (main thread only). Agents do not
    inherit this: their reaper puts the signals back to their defaults."""
    for name in TERMINAL_STOPS:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)


def start_daemon() -> Daemon | None:
    """Start the daemon for `owl daemon` or the tray, or say in one line why not."""
    _setup_logging()
    if threading.current_thread() is threading.main_thread():
        ignore_terminal_stops()
        _stacks_on_request()
    d = Daemon()
    try:
        d.start()
    except StartupError as e:
        print(f"owl: {e}", file=sys.stderr)
        return None
    return d


def _stacks_on_request() -> None:
    """`kill -USR1` on a daemon that seems stuck writes where every thread is
    to its stderr (its log), for a bug report; nothing else changes."""
    import faulthandler

    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError):    # no usable stderr
        pass


def run_foreground() -> int:
    """`owl daemon`: serve until SIGTERM or SIGINT, then end every Run and exit.

    The stop signals are caught before the daemon starts: it answers on its
    socket before start() returns, and a SIGTERM in between would otherwise
    kill it outright, its Runs and watchdog left to crash recovery."""
    stop = catch_stop_signals()
    d = start_daemon()
    return 1 if d is None else serve_until_signal(d, stop)


def catch_stop_signals() -> threading.Event:
    """SIGTERM, SIGINT and SIGHUP set the returned event (main thread only)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    return stop


def serve_until_signal(d: Daemon, stop: threading.Event | None = None) -> int:
    """Serve until a stop signal (or the engine stops), then close.

    Why the main thread waits in select() on a wakeup pipe and not on the
    Event: the kernel hands a signal to any thread of the process, and a
    Python handler runs only in the main thread. A main thread asleep in a
    lock (Event.wait) is not woken when another thread took the signal, so a
    SIGTERM could wait out the whole timeout. The signal module writes every
    signal's number to the wakeup pipe, whichever thread took it, so select()
    returns and the handler runs at once."""
    import select

    if stop is None:
        stop = catch_stop_signals()
    r, w = os.pipe()
    for fd in (r, w):
        os.set_blocking(fd, False)
    try:
        old = signal.set_wakeup_fd(w)
    except ValueError:            # not the main thread: no signal reaches this loop
        old = None
    try:
        while not stop.is_set() and not d.engine.stopped:  # type: ignore[union-attr]
            if old is None:
                stop.wait(30.0)
                continue
            select.select([r], [], [], 30.0)
            try:
                os.read(r, 512)
            except BlockingIOError:
                pass
    finally:
        if old is not None:
            signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        d.close()
    return 0


LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
LOG_NAME = "owl.log"      # in Owl's log folder; the LaunchAgent's output goes there too


def _setup_logging() -> None:
    """Log to stderr, and also to `owl.log` in the log folder whenever stderr
    is not a terminal: a login item's stderr is /dev/null (or, from Owl's
    LaunchAgent, that very file, which then is not opened twice)."""
    level = os.environ.get("OWL_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format=LOG_FORMAT, stream=sys.stderr)
    from owl.textsafe import LogFormatter

    for h in logging.getLogger().handlers:
        h.setFormatter(LogFormatter(LOG_FORMAT))
    try:
        if sys.stderr is None or not sys.stderr.isatty():
            _log_to_file(get_paths().logs / LOG_NAME)
    except (OSError, ValueError) as e:   # an unwritable log folder must not stop Owl
        log.warning("cannot log to a file: %s", e)


def _log_to_file(target: Any) -> None:
    from owl.paths import make_private_dir

    make_private_dir(target.parent)
    try:
        err = os.fstat(sys.stderr.fileno()) if sys.stderr is not None else None
    except (OSError, ValueError, AttributeError):
        err = None
    if err is not None and target.exists():
        mine = target.stat()
        if (mine.st_dev, mine.st_ino) == (err.st_dev, err.st_ino):
            return          # stderr already is the log file
    root = logging.getLogger()
    if any(getattr(h, "baseFilename", None) == str(target) for h in root.handlers):
        return
    handler = logging.FileHandler(target, encoding="utf-8")
    from owl.textsafe import LogFormatter

    handler.setFormatter(LogFormatter(LOG_FORMAT))
    root.addHandler(handler)
