"""A daemon already running, as the tray sees it over the control socket.

One daemon per OWL_HOME, any number of views: when `owl` finds a daemon
answering (one `owl add` started in the background, `owl daemon`, a systemd
unit), the tray joins it as a client instead of refusing. It reads the status
and asks verbs as the CLI does, and waits on `status.wait` for the daemon's
next change, so its menu follows at once. Quitting such a tray quits the tray
only: the daemon and its Runs go on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from owl.control.client import ask

VERB_TIMEOUT = 120.0  # a merge or a worktree removal may take a while
# accept may sign the Job's commits first, each waiting on a passphrase up to two minutes
ACCEPT_TIMEOUT = 600.0
WAIT_S = 25.0  # one `status.wait` (the daemon's own cap is 30 s)


class RemoteDaemon:
    """The DaemonLike of `owl.tray.app` for a daemon in another process."""

    owns_daemon = False

    def __init__(self, socket: Path, pid: int | None = None) -> None:
        self.socket = Path(socket)
        self.pid = pid

    def status(self) -> dict:
        return ask(self.socket, "status", timeout=10.0)

    def call(self, verb: str, **args: Any) -> Any:
        wait = ACCEPT_TIMEOUT if verb == "accept" else VERB_TIMEOUT
        return ask(self.socket, verb, args, timeout=wait)

    def wait_change(self, since: int, timeout: float = WAIT_S) -> int:
        """The daemon's change count once past `since` (NoDaemon once it is gone)."""
        out = ask(
            self.socket,
            "status.wait",
            {"since": since, "timeout_s": min(timeout, WAIT_S)},
            timeout=min(timeout, WAIT_S) + 10.0,
        )
        return int(out["generation"])

    def request_stop(self) -> None:
        """Quit of a joined tray: nothing to stop, the daemon is not ours."""
