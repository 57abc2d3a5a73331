"""Where the daemon's log goes: stderr, and `owl.log` in Owl's log folder
whenever stderr is not a terminal (a login item's stderr is /dev/null)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from owl.settings.paths import get_paths, make_private_dir
from owl.logsafe import LogFormatter

log = logging.getLogger("owl.daemon")

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
LOG_NAME = "owl.log"  # in Owl's log folder; the LaunchAgent's output goes there too


def setup_logging() -> None:
    """Log to stderr, and also to `owl.log` in the log folder whenever stderr
    is not a terminal: a login item's stderr is /dev/null (or, from Owl's
    LaunchAgent, that very file, which then is not opened twice)."""
    level = os.environ.get("OWL_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO), format=LOG_FORMAT, stream=sys.stderr
    )
    for h in logging.getLogger().handlers:
        h.setFormatter(LogFormatter(LOG_FORMAT))
    # A library's Python warning is a log line like any other, not a source
    # line on the person's terminal.
    logging.captureWarnings(True)
    try:
        if sys.stderr is None or not sys.stderr.isatty():
            _log_to_file(get_paths().logs / LOG_NAME)
    except (OSError, ValueError) as e:  # an unwritable log folder must not stop Owl
        log.warning("cannot log to a file: %s", e)


def _log_to_file(target: Path) -> None:
    make_private_dir(target.parent)
    try:
        err = os.fstat(sys.stderr.fileno()) if sys.stderr is not None else None
    except (OSError, ValueError, AttributeError):
        err = None
    if err is not None and target.exists():
        mine = target.stat()
        if (mine.st_dev, mine.st_ino) == (err.st_dev, err.st_ino):
            return  # stderr already is the log file
    root = logging.getLogger()
    if any(getattr(h, "baseFilename", None) == str(target) for h in root.handlers):
        return
    handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(LogFormatter(LOG_FORMAT))
    root.addHandler(handler)
