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
from typing import TYPE_CHECKING, Any

from owl.settings import config as configmod
from owl import tree
from owl.daemon import crash_recovery
from owl.daemon import dispatch
from owl.daemon import watchdog
from owl.daemon.logfile import LOG_NAME, setup_logging
from owl.engine.loop import Engine
from owl.errors import StoreError
from owl.settings import daemonlock
from owl.settings.paths import Paths, get_paths
from owl.store.db import Store
from owl.verbs import looking

if TYPE_CHECKING:
    from owl.control.server import Server

log = logging.getLogger("owl.daemon")

CRASH_REASON = crash_recovery.CRASH_REASON
LOCK_WAIT = 15.0  # how long a start waits for a dead daemon's watchdog
PEEK_WAIT = 0.5  # how long it waits out a command's look at the lock
# How long a stop waits for the engine to end every Run (TERM, KILL 5 s later,
# then each Run's last git): a slow disk or a busy machine can take past 10 s,
# and the systemd unit allows 30 (TimeoutStopSec). Past this the daemon goes
# without its clean word and the watchdog ends what is left.
STOP_WAIT = 20.0


class StartupError(Exception):
    """The daemon will not start; str() is one line saying why."""


class Daemon:
    def __init__(self, paths: Paths | None = None) -> None:
        self.paths = paths or get_paths()
        self._lock_fd: int | None = None
        self.server: Server | None = None
        self.engine: Engine | None = None
        self.store: Store | None = None
        self.guard: watchdog.Guard | None = None
        self.notifier: Any = None  # owl.notify.service.Notifier
        self._no_nap: Any = None  # macOS: the App Nap opt-out (power.appnap)
        self.started_at = time.time()
        self.with_tray = False  # the tray runs in this process (owl.daemon.trayd)

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
        from owl.engine import containing

        why = containing.warm()  # asked once here (a process), never on the engine's thread;
        # before the daemon is a subreaper, so bwrap's own child is reaped by bwrap's wait
        if why:
            log.warning("Runs cannot be contained here: %s", why)
        from owl.power import sleeptimer

        sleeptimer.cached()  # the desktop's own suspend timer, read on a thread of its own
        tree.become_subreaper()
        self._recover(instance)
        self.engine = Engine(
            store=self.store,
            paths=paths,
            cfg=cfg,
            machine=self._machine(),
            inhibitor=self._inhibitor(cfg),
            instance=instance,
        )
        from owl.control.server import Server

        server = self.server = Server(paths.socket, self.dispatch)
        try:
            server.listen()
        except OSError as err:
            self.engine = None
            raise StartupError(f"cannot listen on {paths.socket}: {err}") from None
        assert self._lock_fd is not None
        daemonlock.record(self._lock_fd, os.getpid(), str(paths.socket), daemonlock.READY)
        self._no_nap = _no_app_nap()
        # Before any Run starts: should this process die, the guard ends its Runs.
        self.guard = watchdog.start(paths.db, paths.lock, instance, paths.logs)
        self._start_notifier(cfg)
        self.engine.start()
        log.info(
            "owl daemon %s started (pid %s, home %s)", instance[:8], os.getpid(), paths.db.parent
        )

    def _start_notifier(self, cfg: configmod.Config) -> None:
        """The person's channels and replies (owl.notify), on threads of their own.
        A reply is carried out by the same verbs the socket serves."""
        from owl.notify.service import Notifier

        engine, store = self.engine, self.store
        assert engine is not None and store is not None

        def remember(channel: str, ident: str) -> bool:
            return bool(engine.call(lambda: store.seen_once(channel, ident)))

        self.notifier = Notifier(cfg, ask=self.dispatch, remember=remember)
        engine.notifier = self.notifier
        self.notifier.start()

    def _take_lock(self) -> None:
        """The home's one-daemon lock, beside the database, whatever the
        environment says of runtime folders; refused in one line naming the
        daemon that holds it and its socket."""
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                os.lseek(fd, 0, os.SEEK_SET)
                other = daemonlock.parse(os.read(fd, 4096).decode(errors="replace"))
                waited = time.monotonic() - started
                # A command's look at the lock holds it for an instant; a dead
                # daemon's watchdog holds it while it ends that daemon's Runs.
                if waited < PEEK_WAIT or (not other.alive() and waited < LOCK_WAIT):
                    time.sleep(0.02)
                    continue
                os.close(fd)
                raise StartupError(
                    f"another Owl daemon is already running for "
                    f"{self.paths.db.parent} ({other.naming()})"
                ) from None
        daemonlock.record(fd, os.getpid(), str(self.paths.socket), daemonlock.STARTING)
        self._lock_fd = fd

    def _recover(self, instance: str) -> None:
        assert self.store is not None
        crash_recovery.recover(self.store, instance, self.paths.logs)

    def _machine(self) -> Any:
        """The machine's input and power, with the screen's lock where the desktop
        says it over D-Bus (Linux and the BSDs; on the manual machine too, so a
        script can lock a test session's screen)."""
        from owl.idle.machine import LockedMachine

        machine = self._input_machine()
        if sys.platform in ("darwin", "win32"):
            return machine
        from owl.idle.screenlock import ScreenLock

        return LockedMachine(machine, ScreenLock())

    def _input_machine(self) -> Any:
        from owl.idle.machine import ManualMachine

        if os.environ.get("OWL_MACHINE") == "manual":
            return ManualMachine()
        try:
            from owl.idle.machine import RealMachine

            # idle.after as the engine has it now (edits apply without a restart).
            return RealMachine(after=self._idle_after)
        except Exception as e:  # no backend at all: the machine cannot be read
            log.warning("idle detection unavailable: %s", e)
            return _Unreadable(str(e))

    def _idle_after(self) -> float:
        """idle.after as the engine has it now (edits apply without a restart)."""
        assert self.engine is not None  # asked by the machine, which runs once the engine does
        return self.engine.cfg.idle_after

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
        fd = self._lock_fd
        held = fd is not None  # this daemon ran: its stop is said once
        if fd is not None:  # a command meanwhile waits for it to be gone, rather than refuse
            daemonlock.record(fd, os.getpid(), str(self.paths.socket), daemonlock.STOPPING)
        if self.engine is not None and not self.engine.stopped and not self.engine.stop(STOP_WAIT):
            log.warning(
                "the Runs were not all ended %.0f s after the stop: the watchdog ends what is left",
                STOP_WAIT,
            )
        if self.notifier is not None:
            self.notifier.stop()
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
        if held and self.engine is not None:
            log.info("owl daemon %s stopped (pid %s)", self.engine.instance[:8], os.getpid())

    # -------------------------------------------------------------- interface

    def status(self) -> dict:
        engine = self.engine
        assert engine is not None
        return engine.call(lambda: looking.status(engine))

    def call(self, verb: str, **args: Any) -> Any:
        return self.dispatch(verb, args)

    def wait_change(self, since: int, timeout: float) -> int:
        """The engine's change count, once past `since` (or after `timeout` s)."""
        assert self.engine is not None
        return self.engine.changes.wait(since, timeout)

    def about(self) -> dict:
        """`owl daemon status`: this process, its home, log, and whether a tray shows it."""
        return {
            "pid": os.getpid(),
            "home": str(self.paths.db.parent),
            "socket": str(self.paths.socket),
            "started_at": self.started_at,
            "tray": self.with_tray,
            "log": str(self.paths.logs / LOG_NAME),
        }

    def dispatch(self, verb: str, args: dict[str, Any]) -> Any:
        """Every verb the socket and the tray may ask (`owl.daemon.dispatch`)."""
        assert self.engine is not None
        return dispatch.answer(self.engine, self.paths, self.about, verb, args)


class _Unreadable:
    """The machine when no idle backend could be loaded at all."""

    def __init__(self, problem: str) -> None:
        from owl.idle.machine import Reading

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
    except Exception as e:  # never a reason not to start
        log.warning("cannot opt out of App Nap: %s", e)
        return None


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
    setup_logging()
    _mend_path()
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


def _mend_path() -> None:
    """Before any agent is looked up: a PATH that finds one (see launchd.mend_path)."""
    from owl.autostart.launchd import mend_path, path_read

    try:
        path, source = mend_path()
    except Exception as e:  # a broken login shell must not stop the daemon
        log.warning("PATH as inherited (%s): %s", os.environ.get("PATH", ""), e)
        return
    if source != "inherited" or sys.platform == "darwin":
        log.info("PATH %s (%s)", path, source)
    read = path_read()
    if read is not None and read.path is None:
        log.warning(
            "the login shell's PATH could not be read: tried %s; %s; it printed: %r",
            read.tried,
            read.why,
            read.said[-500:],
        )


def _stacks_on_request() -> None:
    """`kill -USR1` on a daemon that seems stuck writes where every thread is
    to its stderr (its log), for a bug report; nothing else changes."""
    import faulthandler

    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError):  # no usable stderr
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
    except ValueError:  # not the main thread: no signal reaches this loop
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
