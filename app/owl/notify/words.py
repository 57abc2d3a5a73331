"""A reply's words from the phone, read as one of the few commands it may be.

Pure. The text is data: it is never split into a command line, never passed
to a shell; the only words understood are these, and anything else gets the
list back:

    12 also cover the empty case   -> reply to Job 12 with that text
    12 accept                      -> accept Job 12 (as `owl jobs accept 12`)
    12 drop                        -> drop Job 12
    pause | resume | status        -> as the verbs of the same names

A leading "job" or "#" is allowed ("job 12 accept", "#12 drop").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HELP = (
    "Owl understands: '12 <your reply>' (Job 12 goes back to the queue with it), "
    "'12 accept', '12 drop', 'pause', 'resume', 'status'."
)

_JOB = re.compile(r"^\s*(?:job\s*|#)?(\d{1,9})\b[\s:,.-]*(.*)\Z", re.IGNORECASE | re.DOTALL)
_WORDS = ("pause", "resume", "status")


@dataclass(frozen=True)
class Command:
    """What a reply asks: `verb` is reply, accept, drop, pause, resume, status or help."""

    verb: str
    job_id: int | None = None
    text: str | None = None


def parse(message: str, about_job: int | None = None) -> Command:
    """The command in `message`. `about_job`: the Job of the message it answers
    (Telegram's reply-to), which stands in for a leading number."""
    text = (message or "").strip()
    lowered = text.lower().rstrip(".!")
    if lowered in _WORDS:
        return Command(lowered)
    m = _JOB.match(text)
    if m:
        job_id, rest = int(m.group(1)), m.group(2).strip()
    elif about_job is not None and text:
        job_id, rest = about_job, text
    else:
        return Command("help")
    if job_id < 1:
        return Command("help")
    word = rest.lower().rstrip(".!")
    if word in ("accept", "drop"):
        return Command(word, job_id)
    if not rest:
        return Command("help")
    return Command("reply", job_id, rest)


def job_of(message: str) -> int | None:
    """The Job a message of Owl's is about ("Job 12 ready for review"), if any."""
    m = re.search(r"\bjob (\d{1,9})\b", message or "", re.IGNORECASE)
    return int(m.group(1)) if m else None


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"
