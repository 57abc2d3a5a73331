"""What the tray does for a Job in review: its page, and the notification's button.

Mixed into `TrayApp`: "Review" (from the menu or a notification's button)
asks the daemon to write the Job's review page, on a thread of its own since
git may be slow on a large branch, and opens it with the desktop's opener.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from owl.errors import Refused
from owl.tray.items import Action
from owl.tray.toolkit import Call

log = logging.getLogger("owl.tray")

DEFAULT_ACTION = "default"  # the key a click on a notification's body sends


class ComingBack:
    """The Review action and the notification buttons; see the module docstring."""

    daemon: Any
    _buttons: Any
    _buttons_ok: bool | None
    # What TrayApp provides: its toolkit's hop to the main thread, and its actions.
    _main: Callable[[Call], None]
    _notify: Callable[[str, str], None]
    _open: Callable[[str], None]
    on_action: Callable[[Action], None]

    def _buttons_on(self) -> bool:
        """Notifications with a Review button, started on first use (False: plain ones)."""
        if self._buttons_ok is None:
            from owl.tray.buttons import Buttons

            self._buttons = Buttons(self._on_button)
            self._buttons_ok = self._buttons.start()
        return bool(self._buttons_ok)

    def _on_button(self, tag: str, key: str) -> None:
        """A button of one of our notifications was picked (on the D-Bus thread)."""
        if key in (DEFAULT_ACTION, "review") and tag.isdigit():
            self._main(lambda: self.on_action(Action("review", args=(("job_id", int(tag)),))))

    def _review(self, job_id: int) -> None:
        """Write a Job's review page (off the toolkit's thread: git may be slow) and open it."""
        try:
            out = self.daemon.call("review", job_id=job_id)
            path = out.get("path") if isinstance(out, dict) else None
            if not path:
                raise Refused(f"no review page for job {job_id}")
        except Refused as e:
            reason = str(e)
            self._main(lambda: self._notify("Review: refused", reason))
            return
        except Exception as e:
            log.exception("review of job %s failed", job_id)
            reason = f"review failed: {e}"
            self._main(lambda: self._notify("Owl", reason))
            return
        self._main(lambda: self._open(str(path)))
