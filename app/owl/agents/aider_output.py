"""What an aider Run's plain-text output says happened: the facts `jobrules` decides on.

As measured with aider 0.86.2 (`--no-pretty --no-stream`, its console
COLUMNS wide enough that no line wraps) against a chat-completions stub:

- A reply is printed whole, then "Tokens: 1.2k sent, 56 received. Cost:
  $0.0018 message, $0.0018 session." (counts rounded by aider: "1.2k" is
  1200; the cost only where the model's prices are known; "cache write" and
  "cache hit" counts between when the provider gives them), then each edit
  ("Applied edit to hello.txt") and aider's commit ("Commit 0efab51 Add hello").
- An API error is litellm's own line, "litellm.RateLimitError: RateLimitError:
  OpenAIException - <the provider's message>", then aider's words for it
  ("The API provider has rate limited you. Try again later or check your
  quotas."), then "Retrying in 0.2 seconds..." while aider retries (0.25 s
  doubling to 32 s, about a minute in all, each try also retried by the
  OpenAI client). When it gives up no "Retrying" follows, and aider still
  exits 0: `gave_up` says so, or the Run would pass for done.
- A rate limit's reset is in the provider's words, passed through ("Please try
  again in 7m12s."), and read from them.
- No session id: the conversation is `.aider.chat.history.md` in the worktree.
"""

from __future__ import annotations

import re

from owl.agents.resets import reset_moment, reset_words
from owl.rules.jobrules import Report

_ERROR = re.compile(r"^litellm\.(?P<name>[A-Za-z]*(?:Error|Timeout))\b")
_FRIENDLY = {
    "The API provider has rate limited you.": "RateLimitError",
    "The API provider's servers are down or overloaded.": "ServiceUnavailableError",
    "The API provider timed out without returning a response.": "Timeout",
    "The API provider is not able to authenticate you.": "AuthenticationError",
}
_RETRY = re.compile(r"^Retrying in [\d.]+ seconds")
_TOKENS = re.compile(
    r"^Tokens:\s*(?P<sent>[\d.,]+)(?P<sk>[km]?)\s+sent"
    r"(?:,\s*(?P<cw>[\d.,]+)(?P<cwk>[km]?)\s+cache write)?"
    r"(?:,\s*(?P<ch>[\d.,]+)(?P<chk>[km]?)\s+cache hit)?"
    r",\s*(?P<recv>[\d.,]+)(?P<rk>[km]?)\s+received\."
    r"(?:\s*Cost:\s*\$(?P<msg>[\d.,]+)\s+message,\s*\$(?P<sess>[\d.,]+)\s+session\.)?"
)
# litellm's error names that are the service failing, and how a person reads them
_SERVICE = {
    "InternalServerError": "server error",
    "ServiceUnavailableError": "service unavailable",
    "BadGatewayError": "HTTP 502 bad gateway",
    "APIConnectionError": "connection error",
    "Timeout": "timed out",
    "APIError": "server error",
}
# a provider's words for a plan's limit rather than a rate (aider's own "check
# your quotas" follows every rate limit, so it says nothing)
_QUOTA_WORDS = ("insufficient_quota", "exceeded your current quota", "usage limit", "billing")
_HEADER = ("Aider v", "Model:", "Git repo:", "Repo-map:", "Restored previous conversation")
_PATH = re.compile(r"^[\w.@+-]*(?:/[\w.@+-]+)*\.\w+$|^[\w.@+-]+(?:/[\w.@+-]+)+$")
_TAIL = 4000  # lines of the output looked at: the end says how it ended
_LINE = 2000  # characters of a line looked at
_SAID = 600  # characters of the error kept for the reason


def read_report(lines: list[str], code: int, *, now: float = 0.0) -> Report:
    """The facts in aider's output (see the module docstring); never raises on odd lines.

    `code` is not needed: aider exits 0 whether or not it gave up, and a Run
    Owl killed mid-retry is judged by how it ended."""
    tail = [ln[:_LINE].rstrip("\r\n") for ln in lines[-_TAIL:]]
    usage = _usage(tail)
    err = _last_error(tail)
    limit = resets = said = service = gave_up = None
    if err is not None:
        name, text, retrying = err
        gave_up = None if retrying else text[:_SAID]
        if name == "RateLimitError":
            low = text.lower()
            limit = "usage" if any(w in low for w in _QUOTA_WORDS) else "rate_limit"
            resets = reset_moment(text, now) if now else None
            said = reset_words(text)
        elif name in _SERVICE:
            service = _SERVICE[name]
    return Report(
        limit=limit,
        resets_at=resets,
        reset_said=said,
        service_error=service,
        gave_up=gave_up,
        usage=usage,
        last_message=last_reply(tail),
    )


def _last_error(tail: list[str]) -> tuple[str, str, bool] | None:
    """(litellm's error name, its words joined, whether aider was retrying it)
    for the last API error not followed by a reply; None when there is none."""
    for i in range(len(tail) - 1, -1, -1):
        if _TOKENS.match(tail[i]):
            return None  # a reply came after any error before it
        name = _error_name(tail[i])
        if name is None:
            continue
        i, name = _start_of(tail, i, name)
        block, retrying = [tail[i].strip()], False
        for later in tail[i + 1 : i + 12]:
            if _RETRY.match(later):
                retrying = True
                break
            if _ERROR.match(later):
                break
            block.append(later.strip())
        return name, " ".join(w for w in block if w), retrying
    return None


def _start_of(tail: list[str], i: int, name: str) -> tuple[int, str]:
    """Where the error whose aider words are at `i` starts: litellm's line just
    above them (a few lines up, should a narrow console have wrapped it)."""
    if _ERROR.match(tail[i]):
        return i, name
    for j in range(i - 1, max(-1, i - 8), -1):
        if _RETRY.match(tail[j]) or _TOKENS.match(tail[j]):
            break
        m = _ERROR.match(tail[j])
        if m:
            return j, m.group("name")
    return i, name


def _error_name(line: str) -> str | None:
    """litellm's name of the error `line` starts, or the name of aider's words for one."""
    m = _ERROR.match(line)
    if m:
        return m.group("name")
    return next((n for w, n in _FRIENDLY.items() if line.startswith(w)), None)


def last_reply(tail: list[str]) -> str | None:
    """The words of aider's last reply before its "Tokens:" line, without the
    files it wrote (a path line, then a fenced block), cut short."""
    end = next((i for i in range(len(tail) - 1, -1, -1) if _TOKENS.match(tail[i])), None)
    if end is None:
        return None
    start = end
    while start > 0 and not _bounds_a_reply(tail[start - 1]):
        start -= 1
    # aider names each file it asks itself about ("Add file to the chat?",
    # answered by --yes-always) on a line of its own, before the reply
    while start < end and (not tail[start].strip() or _is_path(tail[start])):
        start += 1
    prose: list[str] = []
    for line in tail[start:end]:
        if line.startswith("```"):
            while prose and not prose[-1].strip():
                prose.pop()
            if prose and _is_path(prose[-1]):
                prose.pop()
            break
        prose.append(line)
    text = "\n".join(prose).strip()
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text[:4000] or None


def _bounds_a_reply(line: str) -> bool:
    """Whether `line` is printed before a reply begins: the header, the end of an
    earlier reply, aider retrying an API call."""
    return bool(_TOKENS.match(line) or _RETRY.match(line) or line.startswith(_HEADER))


def _is_path(line: str) -> bool:
    """Whether `line` is a file's path alone ("src/app.py"), as aider prints one."""
    word = line.strip()
    return len(word) <= 300 and _PATH.match(word) is not None


def _count(number: str | None, scale: str | None) -> float | None:
    if not number:
        return None
    try:
        value = float(number.replace(",", ""))
    except ValueError:
        return None
    return round(value * {"k": 1e3, "m": 1e6}.get((scale or "").lower(), 1))


def _usage(tail: list[str]) -> dict | None:
    """The Run's tokens, summed over its replies' lines, and the session's cost
    as the last line gives it (aider counts the session from its start)."""
    keys = {
        "input_tokens": ("sent", "sk"),
        "output_tokens": ("recv", "rk"),
        "cache_creation_input_tokens": ("cw", "cwk"),
        "cache_read_input_tokens": ("ch", "chk"),
    }
    total: dict = {k: None for k in keys}
    cost = None
    replies = 0
    for line in tail:
        m = _TOKENS.match(line)
        if not m:
            continue
        replies += 1
        for key, (num, scale) in keys.items():
            n = _count(m.group(num), m.group(scale))
            if n is not None:
                total[key] = (total[key] or 0) + n
        if m.group("sess"):
            cost = _dollars(m.group("sess"))
    if not replies:
        return None
    return {**total, "num_turns": replies, "total_cost_usd": cost}


def _dollars(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
