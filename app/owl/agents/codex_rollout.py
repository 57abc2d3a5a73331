"""Codex's usage windows, from the conversation's rollout file: `exec --json` does not say them.

As measured with Codex CLI 0.171.0 against a Responses API stub: Codex reads
a ChatGPT plan's windows from every answer's headers
(`x-codex-primary-used-percent`, `-primary-window-minutes`,
`-primary-reset-at`, and the same for `secondary`), but `codex exec --json`
prints none of it: its lines carry only `turn.completed` {usage}. The
rollout it writes for the thread, `$CODEX_HOME/sessions/YYYY/MM/DD/
rollout-<time>-<thread id>.jsonl`, does: each `event_msg` of type
`token_count` has `rate_limits: {primary: {used_percent, window_minutes,
resets_at}, secondary: {...}}` (primary the 5-hour window, 300 minutes;
secondary the week, 10080). So the windows are read from there, once the Run
has ended, on the Run's own thread. A contained Run's `$CODEX_HOME` is the
folder Owl keeps Codex's state in for its project (`owl.sandbox.ownhome`),
bound where the Run sees `~/.codex` (linked there on macOS): it is read
there (`run_home`), never in the person's own Codex home.

The file is in a folder the agent may write, so it is hostile data: opened
without following a link at its end, only a regular file, only its last
TAIL bytes, and the numbers are checked by `owl.rules.budget` before anything
is done with them.
"""

from __future__ import annotations

import glob
import json
import math
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from owl.rules.budget import FIVE_HOUR, SEVEN_DAY, Reading, real

TAIL = 512 * 1024
MINUTES = {300: FIVE_HOUR, 10080: SEVEN_DAY}
BY_PLACE = {"primary": FIVE_HOUR, "secondary": SEVEN_DAY}


def codex_home(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    return Path(env.get("CODEX_HOME") or Path.home() / ".codex")


def on_host(path: Path, kept: Sequence[tuple[str, str]]) -> Path:
    """Where `path`, as the Run saw it, is on the host: under the nearest of the
    Run's own places Owl keeps (`kept`: (inside, on the host), a contained Run's
    agent state among them), or `path` itself (an uncontained Run's, the
    person's own)."""
    found = _kept(path, kept)
    return path if found is None else found


def _kept(path: Path, kept: Sequence[tuple[str, str]]) -> Path | None:
    """`path` under the nearest of `kept` that holds it, on the host; or None."""
    best: tuple[str, str] | None = None
    for inside, source in kept:
        if (path == Path(inside) or Path(inside) in path.parents) and (
            best is None or len(inside) > len(best[0])
        ):
            best = (inside, source)
    return None if best is None else Path(best[1]) / path.relative_to(best[0])


def run_home(kept: Sequence[tuple[str, str]], env: dict[str, str] | None = None) -> Path | None:
    """Where the Run's Codex kept its state, on the host. Not contained (no
    `kept`): the person's `$CODEX_HOME` (or `~/.codex`). Contained: the Run's
    own copy, under the place Owl laid Codex's state at: `$CODEX_HOME`'s (on
    Linux Owl's folder is bound there), else `~/.codex`'s (on macOS a
    `$CODEX_HOME` outside the home is not passed in, since Seatbelt cannot lay
    Owl's folder there: Codex keeps its state at its default, linked to Owl's,
    `owl.sandbox.macview.settled`). Never a folder outside the Run's own
    places, such as the person's own Codex home: None then."""
    home = codex_home(env)
    if not kept:
        return home
    env = dict(os.environ) if env is None else env
    default = Path(env.get("HOME") or Path.home()) / ".codex"
    for path in (home, default):
        found = _kept(path, kept)
        if found is not None:
            return found
    return None


def rollout_of(home: Path, thread: str) -> Path | None:
    """The newest rollout file of `thread` under `home` (a UUID: no glob in it)."""
    if not thread or any(c not in "0123456789abcdef-" for c in thread.lower()):
        return None
    found = glob.glob(str(home / "sessions" / "*" / "*" / "*" / f"rollout-*-{thread}.jsonl"))
    return Path(max(found)) if found else None


def windows(home: Path, thread: str | None, now: float) -> list[Reading]:
    """The windows of the last `token_count` event of the thread's rollout; none
    when there is no such file or it says nothing of them. Never raises."""
    for payload in _payloads(home, thread, ('"rate_limits"', '"token_count"')):
        limits = payload.get("rate_limits")
        if isinstance(limits, dict):
            return _readings(limits, now)
    return []


def error_info(home: Path, thread: str | None) -> tuple[str, int | None] | None:
    """What the thread's last failed turn says of itself: its `codex_error_info`
    (`usage_limit_exceeded`, `server_overloaded`, `http_connection_failed`, ...,
    a word or a one-key object) and the HTTP status it carries, if any; None
    when the rollout names none. Never raises.

    As measured with 0.171.0: the rollout's `task_complete` event of a turn
    that failed has `error: {message, codex_error_info}`; `exec --json` prints
    only the message."""
    for payload in _payloads(home, thread, ('"codex_error_info"',)):
        error = payload.get("error")
        got = _info(error.get("codex_error_info")) if isinstance(error, dict) else None
        if got is not None:
            return got
    return None


def _payloads(home: Path, thread: str | None, marks: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The `payload` objects of the thread's rollout, newest first, of the lines
    holding every one of `marks` (a cheap test before a line is parsed)."""
    path = rollout_of(home, thread or "")
    if path is None:
        return
    for line in reversed(_tail(path)):
        if not all(m in line for m in marks):
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        payload = event.get("payload") if isinstance(event, dict) else None
        if isinstance(payload, dict):
            yield payload


def _info(info: Any) -> tuple[str, int | None] | None:
    """`"usage_limit_exceeded"` or `{"http_connection_failed": {"http_status_code": 503}}`."""
    if isinstance(info, str) and 0 < len(info) <= 64:
        return info, None
    if isinstance(info, dict) and len(info) == 1:
        [(name, data)] = info.items()
        status = data.get("http_status_code") if isinstance(data, dict) else None
        code = int(status) if isinstance(status, int) and 100 <= status <= 599 else None
        return (str(name)[:64], code) if isinstance(name, str) else None
    return None


def _readings(limits: dict[str, Any], now: float) -> list[Reading]:
    out = []
    for place, default in BY_PLACE.items():
        w = limits.get(place)
        if not isinstance(w, dict):
            continue
        minutes = real(w.get("window_minutes"))
        window = MINUTES.get(int(minutes)) if minutes is not None else default
        if window is None:
            continue  # a window of another length: no line is kept for it
        used = real(w.get("used_percent"))
        reset = real(w.get("resets_at"))
        if reset is None and real(w.get("resets_in_seconds")) is not None:
            reset = now + (real(w.get("resets_in_seconds")) or 0.0)
        out.append(
            Reading(
                window,
                used / 100 if used is not None else math.nan,
                reset if reset is not None else math.nan,
                now,
            )
        )
    return out


def _tail(path: Path) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return []
        os.lseek(fd, max(0, st.st_size - TAIL), os.SEEK_SET)
        data = os.read(fd, TAIL)
    except OSError:
        return []
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").splitlines()
