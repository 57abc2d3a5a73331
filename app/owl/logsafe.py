"""The daemon's log lines, made safe as `owl.textsafe` makes what is shown.

Apart from `textsafe` because of `logging`: every `owl` call imports
`textsafe`, and only the daemon logs.
"""

from __future__ import annotations

import logging

from owl.textsafe import line


class LogFormatter(logging.Formatter):
    """Log records with their messages made safe as a `line`: a reason or a
    subject an agent wrote reaches the daemon's log, and so whoever tails it,
    without acting on their terminal or splitting into lines of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = line(record.message)
        return super().formatMessage(record)
