"""An agent that could not start for a reason of its setup, in its own words.

Some failures are no fault of the Run and will not go away by trying again:
a variable the agent needs is not set ("Missing environment variable:
`X_API_KEY`": Codex's words, when a contained Run dropped a variable whose
name looks secret), its provider's port on 127.0.0.1 refuses ("connect
ECONNREFUSED 127.0.0.1:11434": a port the Run's own network does not reach),
or the program is not there ("bwrap: execvp my-agent: No such file or
directory"). Spending the Job's attempts on them would exhaust it overnight
for what one line of config fixes, so they are read here as facts
(`Report.setup_problem`) and `jobrules` decides: the Job is blocked once,
with the reason and a hint, and no attempt is spent.

Only the last lines of the output are looked at (an agent's own work may
print these words as it goes: it did start), the words found are cut short,
and nothing read here is obeyed.
"""

from __future__ import annotations

import re
from dataclasses import replace

from owl.rules.jobrules import Report

TAIL = 40  # lines at the end of a Run's output where a failure to start is said
WORDS_MAX = 200

_MISSING_VAR = re.compile(
    r"missing environment variable:?\s*[`'\"]?([A-Za-z_][A-Za-z0-9_]{0,127})", re.IGNORECASE
)
_REFUSED = re.compile(
    r"(?:ECONNREFUSED|connection refused|could not connect|couldn't connect|"
    r"failed to connect|unable to connect)[^\n]{0,120}?"
    r"(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})",
    re.IGNORECASE,
)
_REFUSED_AFTER = re.compile(
    r"(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})[^\n]{0,80}?"
    r"(?:ECONNREFUSED|connection refused)",
    re.IGNORECASE,
)
_NO_PROGRAM = re.compile(
    r"(?:bwrap: execvp|owl: cannot start) ([^\s:]{1,200}):? "
    r"(?:\[Errno 2\] )?No such file or directory",
    re.IGNORECASE,
)
# coreutils' env, which starts a contained agent: "/usr/bin/env: ‘/x/agent’: No such file or directory"
_NO_PROGRAM_ENV = re.compile(
    r"^(?:/usr)?/?(?:bin/)?env: [‘'\"]([^’'\"]{1,200})[’'\"]: No such file or directory"
)


def problem(lines: list[str]) -> str | None:
    """The setup problem the output's last lines say, in a few words, or None."""
    for line in reversed(lines[-TAIL:]):
        m = _MISSING_VAR.search(line)
        if m:
            return f"missing environment variable {m.group(1)}"
        m = _REFUSED.search(line) or _REFUSED_AFTER.search(line)
        if m and 0 < int(m.group(1)) < 65536:
            return f"could not connect to 127.0.0.1:{int(m.group(1))}"
        m = _NO_PROGRAM.search(line) or _NO_PROGRAM_ENV.search(line)
        if m:
            return f"{m.group(1)[:WORDS_MAX]} was not found"
    return None


def read(report: Report, lines: list[str], code: int | None) -> Report:
    """`report` with the setup problem the output says, when the agent failed."""
    if code in (None, 0) or report.limit or report.setup_problem:
        return report
    found = problem(lines)
    return report if found is None else replace(report, setup_problem=found)
