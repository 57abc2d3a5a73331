"""A stopped daemon is not a dead end.

The daemon ignores the terminal's stops (Ctrl-Z's SIGTSTP, SIGTTIN, SIGTTOU);
stopped anyway with SIGSTOP while a Run is frozen, its watchdog keeps the
grace window's promise in its place, and says so in the log.
"""

from __future__ import annotations

import signal
import time

import psutil

from owlproc import OwlDaemon, freeze_a_run, make_project, process_states, wait_for


def test_terminal_stops_do_not_stop_the_daemon(tmp_path):
    with OwlDaemon(tmp_path / "home") as d:
        for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            d.proc.send_signal(sig)
        time.sleep(0.2)  # a stop would take effect at once; give it the chance to
        assert psutil.Process(d.proc.pid).status() != psutil.STATUS_STOPPED
        assert d.owl("status", "--json", timeout=5).returncode == 0


def test_a_sigstopped_daemon_s_frozen_run_still_ends_when_its_window_passes(tmp_path):
    with OwlDaemon(tmp_path / "home") as d:
        job, pids = freeze_a_run(
            d, make_project(tmp_path / "proj"), "setsid-child=120 tick=0.2 sleep=120"
        )
        frozen_at = time.monotonic()
        d.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(
                lambda: set(process_states(pids).values()) <= {"gone", psutil.STATUS_ZOMBIE},
                timeout=12,
                what="the frozen Run to end while the daemon is stopped",
            )
            # the window is 3 s: not before it, and TERM suffices (well within 5 s more)
            took = time.monotonic() - frozen_at
            assert 2.0 <= took <= 3.0 + 5.0 + 2.0, took
            assert "is stopped and run" in d.log_text()
            assert psutil.Process(d.proc.pid).status() == psutil.STATUS_STOPPED
        finally:
            d.proc.send_signal(signal.SIGCONT)
        # continued, the daemon records the Run ended and goes on
        jv = d.wait_job(job, "pending", timeout=15)
        assert jv["runs"][-1]["outcome"] == "interrupted"
        assert "grace window" in jv["runs"][-1]["reason"]
        assert d.stop() == 0


def test_a_stop_with_a_live_run_ends_it_without_a_traceback_in_the_log(tmp_path):
    """Stopping, the engine ends its Runs and brings their branches in itself (no
    later pass would): git on its own thread then is meant, and said nowhere."""
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("commit=work tick=0.2 sleep=120", make_project(tmp_path / "proj"))
        d.ok("start")
        d.wait_run(job, "running")
        assert d.stop(timeout=20) == 0
        log = d.log_text()
        assert "interrupted (sigterm)" in log
        assert "Stack (most recent call last)" not in log and "on the engine thread" not in log
