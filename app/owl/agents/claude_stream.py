"""What a claude Run's stream-json says happened: the facts `jobrules` decides on.

Read from the Run's log after the agent exits, on the thread that waited for
it (never on the engine thread), as measured with Claude Code 2.1.332:

- `system`/`init` carries the conversation's `session_id` (so does `result`),
  and `apiKeySource`: "none" when the CLI runs on a subscription's OAuth
  sign-in (`CLAUDE_CODE_OAUTH_TOKEN` or its credentials file), else where its
  key came from ("ANTHROPIC_API_KEY", "apiKeyHelper", …). Recorded as the
  usage's `billed` (`owl.rules.money`): `total_cost_usd` is a bill only on a key.
- A subscription's usage limit: `rate_limit_event` with `status: rejected`,
  `resetsAt` (epoch) and `rateLimitType` (five_hour, seven_day, ...); then an
  assistant event with `error: rate_limit`, `api_error: usage_limit_reached`
  and the text "You've hit your 5-hour limit · resets 8:10am (UTC)". The
  `allowed` and `allowed_warning` statuses come routinely and are not limits.
- An API key's 429: `error: rate_limit` without `usage_limit_reached`, and
  "API Error: Request rejected (429) · ..." (whose message may carry an older
  "Claude AI usage limit reached|<epoch>").
- The service failing: `api_error_status` 500 or more (529 overloaded), or a
  connection error ("API Error: Connection refused ... (ECONNREFUSED)", with
  `error: server_error` and no status), after the CLI's own retries.
- `result`: `duration_ms`, `num_turns`, `usage`, `total_cost_usd`, and the
  final message in `result`. `total_cost_usd` is the whole conversation's: a
  resumed one counts its earlier Runs again; `model_usage_since_last_result`
  {model: {costUSD, ...}} is this Run's own.
- A subscription's windows, on ordinary answers too: `rate_limit_event` whose
  `rate_limit_info.unifiedWindows` is `{five_hour: {utilization, resetsAt,
  status}, seven_day: {...}}` (status `allowed`, `allowed_warning`), from the
  API's `anthropic-ratelimit-unified-{5h,7d}-{utilization,reset,status}`
  headers; an API key's answers carry none. `windows_in` reads them from one
  line as the Run goes (`owl.rules.budget` decides what they mean).
- The limit checkpoint (from 2.1.246): near `CHECKPOINT_AT` of the five-hour
  window the service makes the model finish its step, list what remains and
  end its turn; the Run exits 0 with a `result` that is no error. The last
  `rate_limit_event` says so (`allowed_warning`, the window's utilization at
  or past the point): read as a limit met at a checkpoint
  (`Report.at_checkpoint`), reset at the window's `resetsAt`.
- `--resume` of a conversation the CLI cannot find (another directory, a
  transcript gone): a `result` with `errors: ["No conversation found with
  session ID: ..."]`, no `init`, and the same line on stderr.

Everything here is the agent's output, so hostile: any line, any JSON value
in any field, at any depth. The readers never raise on it. A session id is
taken only in claude's own shape (a UUID: it goes to `--resume` on the next
Run's command line, where "--help" would be an option), and the first one a
Run announces is the Run's; a later, different one is kept in
`Report.sessions_ignored` for the log, not obeyed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

from owl.agents.resets import reset_time, reset_words
from owl.rules.budget import FIVE_HOUR, SEVEN_DAY, Reading
from owl.rules.jobrules import Report

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_RESUME_WORDS = ("No conversation found", "--resume requires")
_SESSION = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
SAID = 160  # how much of an odd value is kept for the log
# Near this share of the five-hour window the service tells the model to
# checkpoint ("Usage limit approaching. Checkpoint now: finish the current step,
# then list ... remaining work") and the turn ends, exit 0: Claude Code from
# 2.1.246, as its users reported it publicly (about 95 %); the stream's last
# `rate_limit_event` then says `allowed_warning` with that utilization.
CHECKPOINT_AT = 0.95


def is_session_id(value: object) -> bool:
    """Whether `value` has the shape of claude's session ids (a lowercase UUID)."""
    return isinstance(value, str) and _SESSION.match(value) is not None


class _Sessions:
    """The first well-formed session id announced, and what else was."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.ignored: list[str] = []

    def saw(self, value: object) -> None:
        if value is None or value == self.first:
            return
        if self.first is None and is_session_id(value):
            self.first = value  # type: ignore[assignment]
        elif len(self.ignored) < 8:
            self.ignored.append(_said(value))


def read_report(lines: Iterable[str], *, resuming: bool = False, now: float = 0.0) -> Report:
    """The facts in claude's stream-json lines (see the module docstring); never raises."""
    sessions = _Sessions()
    limit = service = resume_failed = last = None
    resets: float | None = None
    said: str | None = None
    usage: dict | None = None
    texts: list[str] = []
    windows: list[Reading] = []
    warned: list[Reading] = []  # the five-hour window of the last rate_limit_event, if warned
    ok = False  # the last result was not an error
    init = False
    key_source: object = None  # the init event's `apiKeySource`: how claude is signed in
    for line in lines:
        event = _event(line) if isinstance(line, str) else None
        if event is None:
            if resuming and isinstance(line, str) and any(w in line for w in _RESUME_WORDS):
                resume_failed = line.strip()[:300]
            continue
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            init = True
            key_source = event.get("apiKeySource", key_source)
            sessions.saw(event.get("session_id"))
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            windows += _windows(info, now)
            warned = _warned(info, now)
            if isinstance(info, dict) and info.get("status") == "rejected":
                limit = _kind(info.get("rateLimitType")) or "usage"
                resets, said = _resets_at(info, resets, said)
        elif kind == "assistant" and event.get("error"):
            text = _text(event)
            texts.append(text)
            got = _api_error(event, text)
            if got[0] == "limit":
                limit = limit or got[1]
                params = event.get("api_error_params")
                info = params.get("rate_limit_info") if isinstance(params, dict) else None
                if isinstance(info, dict):
                    limit = _kind(info.get("rateLimitType")) or limit
                    resets, said = _resets_at(info, resets, said)
            elif got[0] == "service":
                service = got[1]
        elif kind == "result":
            sessions.saw(event.get("session_id"))
            ok = not event.get("is_error") and event.get("subtype") in (None, "success")
            usage = _usage(event)
            last = _str(event.get("result")) or last
            errs = event.get("errors")
            errors = " ".join(map(str, errs[:20])) if isinstance(errs, list) else ""
            if resuming and (
                any(w in errors for w in _RESUME_WORDS)
                or (not init and event.get("is_error") and not event.get("num_turns"))
            ):
                resume_failed = (errors or "the conversation could not be resumed")[:300]
            if event.get("is_error") and limit is None and service is None:
                got = _api_error(event, last or "")
                if got[0] == "limit":
                    limit = got[1]
                elif got[0] == "service":
                    service = got[1]
            if last:
                texts.append(last)
    if limit and resets is None:
        for text in texts:
            resets = reset_time(text, now) if now else None
            if resets:
                said = said or reset_words(text)
                break
            said = said or reset_words(text)
    checkpoint = ok and limit is None and bool(warned)
    if checkpoint:
        limit, resets = FIVE_HOUR, warned[0].resets_at
        said = f"rate_limit_event allowed_warning, five-hour window {warned[0].used:g} used"
    if usage is not None and isinstance(key_source, str):
        # "none": no key, the OAuth sign-in of a subscription, so the cost is
        # the API-equivalent; any other source is a key, and the cost its bill
        usage["billed"] = key_source != "none"
    session = sessions.first
    return Report(
        session_id=session if init or not resume_failed else None,
        limit=limit,
        resets_at=resets,
        service_error=service,
        resume_failed=resume_failed,
        usage=usage,
        last_message=last,
        reset_said=said,
        sessions_ignored=tuple(sessions.ignored),
        windows=tuple(windows[-8:]),
        at_checkpoint=checkpoint,
    )


def _warned(info: Any, now: float) -> list[Reading]:
    """The five-hour window of one `rate_limit_info`, when it says the window is
    at or past the checkpoint (`allowed_warning`, `CHECKPOINT_AT` used or more);
    else none. Read from the stream's fields, never from the model's words."""
    if not isinstance(info, dict):
        return []
    unified = info.get("unifiedWindows")
    own = unified.get(FIVE_HOUR) if isinstance(unified, dict) else None
    statuses = {info.get("status"), own.get("status") if isinstance(own, dict) else None}
    if "allowed_warning" not in statuses:
        return []
    return [
        r
        for r in _windows(info, now)
        if r.window == FIVE_HOUR and CHECKPOINT_AT <= r.used <= 1.5 and math.isfinite(r.resets_at)
    ][-1:]


def windows_in(line: str, now: float) -> list[Reading]:
    """The windows one line of the live stream reports (a `rate_limit_event`),
    or none. Never raises; the values are as claude gave them (a string or a
    huge number becomes NaN, which `budget.insane` refuses)."""
    if '"rate_limit_event"' not in line or len(line) > 64 * 1024:
        return []
    event = _event(line)
    if event is None or event.get("type") != "rate_limit_event":
        return []
    return _windows(event.get("rate_limit_info"), now)


_WINDOW_KEYS = {"five_hour": FIVE_HOUR, "seven_day": SEVEN_DAY}


def _windows(info: Any, now: float) -> list[Reading]:
    """The windows of one `rate_limit_info`: its `unifiedWindows`, and the one
    it names itself (`rateLimitType` with `utilization`: 2.1.332 puts a window
    there, not in `unifiedWindows`, when its reset is far off)."""
    if not isinstance(info, dict):
        return []
    out = []
    kind = info.get("rateLimitType")
    own = _WINDOW_KEYS.get(kind) if isinstance(kind, str) else None
    if own is not None and "utilization" in info:
        out.append(_reading(own, info, now))
    unified = info.get("unifiedWindows")
    for key, window in _WINDOW_KEYS.items():
        w = unified.get(key) if isinstance(unified, dict) else None
        if isinstance(w, dict):
            out.append(_reading(window, w, now))
    return out


def _reading(window: str, w: dict[str, Any], now: float) -> Reading:
    used, reset = _num(w.get("utilization")), _num(w.get("resetsAt"))
    return Reading(
        window,
        float(used) if used is not None and abs(used) < 1e300 else math.nan,
        float(reset) if reset is not None and abs(reset) < 1e300 else math.nan,
        now,
    )


def _resets_at(
    info: dict[str, Any], resets: float | None, said: str | None
) -> tuple[float | None, str | None]:
    """A `resetsAt` (epoch seconds) when it is a real number; what it said either way."""
    if "resetsAt" not in info:
        return resets, said
    raw = info.get("resetsAt")
    value = _num(raw)
    words = f"resetsAt {_said(raw)}"
    if value is not None and math.isfinite(value):
        return (float(value) if value else resets), words
    return resets, words


def session_in(lines: Iterable[str]) -> str | None:
    """The session id of the first `init` event among `lines`, when it is one
    (see `is_session_id`); None otherwise."""
    for line in lines:
        event = _event(line)
        if event and event.get("type") == "system" and event.get("subtype") == "init":
            sid = event.get("session_id")
            return sid if is_session_id(sid) else None
    return None


def _api_error(event: dict[str, Any], text: str) -> tuple[str | None, str | None]:
    """('limit', kind) / ('service', detail) / (None, None) for an error event."""
    status = event.get("api_error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    err = event.get("error")
    if event.get("api_error") == "usage_limit_reached":
        return "limit", "usage"
    if err == "rate_limit" or status == 429 or "usage limit reached|" in text:
        return "limit", "rate_limit"
    if status is not None and status >= 500:
        kind = (_str(event.get("api_error_type")) or "server error")[:60]
        return "service", f"HTTP {status} {kind.replace('_error', '').replace('_', ' ')}"
    low = text.lower()
    if status is None and (
        "connection error" in low
        or "econnrefused" in low
        or "fetch failed" in low
        or "socket hang up" in low
    ):
        return "service", "connection error"
    if err == "server_error":
        return "service", "server error"
    return None, None


def _usage(event: dict[str, Any]) -> dict[str, Any]:
    u = event.get("usage")
    if not isinstance(u, dict):
        u = {}
    out: dict[str, Any] = {
        "duration_ms": _count(event.get("duration_ms")),
        "num_turns": _count(event.get("num_turns")),
    }
    for key in USAGE_KEYS:
        out[key] = _count(u.get(key))
    # `total_cost_usd` counts the whole conversation: a resumed one's earlier
    # Runs too (measured with 2.1.332). `model_usage_since_last_result` is
    # this process's own, per model; where it is given, it is the Run's cost.
    session = _count(event.get("total_cost_usd"))
    own = _own_cost(event.get("model_usage_since_last_result"))
    out["total_cost_usd"] = own if own is not None else session
    if own is not None and session is not None and session != own:
        out["session_cost_usd"] = session
    return out


def _own_cost(models: Any) -> float | None:
    """The sum of `costUSD` over the models of `model_usage_since_last_result`, or None."""
    if not isinstance(models, dict) or not models:
        return None
    total = 0.0
    for m in list(models.values())[:50]:
        cost = _count(m.get("costUSD")) if isinstance(m, dict) else None
        if cost is None:
            return None
        total += cost
    return total


# Only lines that carry one of these are parsed: a long Run's log is mostly
# tool calls and their output, which say nothing about how it ended.
_MARKS = re.compile(r'"init"|"rate_limit_event"|"error"|"type": ?"result"')


def _event(line: str) -> dict[str, Any] | None:
    if line.startswith('{"type":"user"') or not _MARKS.search(line):
        return None
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested past Python's stack
        return None
    return event if isinstance(event, dict) else None


def _text(event: dict[str, Any]) -> str:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return " ".join(
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _kind(v: Any) -> str | None:
    """A limit's kind (five_hour, seven_day): a short word, or None."""
    return v if isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_]{1,40}", v) else None


# A count or a cost beyond this is no count claude made: it is left out, so
# what Owl sums and shows stays a number every reader can hold.
_LARGEST = float(2**53)


def _num(v: Any) -> Any:
    """A number claude reported (usage, a moment), or None: never a bool, NaN,
    an infinity or an integer too long for a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int):
        return v if -(10**300) < v < 10**300 else None
    return v if math.isfinite(v) else None


def _count(v: Any) -> Any:
    n = _num(v)
    return n if n is None or abs(n) <= _LARGEST else None


def _said(v: Any) -> str:
    """A value from the stream, shown short for the log."""
    try:
        text = v if isinstance(v, str) else json.dumps(v)
    except (ValueError, TypeError, RecursionError, OverflowError):
        text = type(v).__name__
    return text if len(text) <= SAID else text[: SAID - 3] + "..."
