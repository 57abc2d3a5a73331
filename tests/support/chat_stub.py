"""An OpenAI chat-completions stub on 127.0.0.1 for the real aider and OpenCode
(see `scripted_http`).

aider 0.86 with `--model openai/stub-model` and OPENAI_API_BASE at this stub
POSTs `{base}/chat/completions` through litellm (non-streamed with
`--no-stream`, streamed otherwise; both are answered). Each of its chat
requests takes the next turn: a `Say` is the model's whole reply, in which
aider finds its edits (`whole` writes a file the way aider's "whole" edit
format, its choice for a model it does not know, expects). aider's own
commit-message request is not a turn: it is answered "Add FILE", FILE the
first file of the diff it sends.

aider runs no shell command of the model's under `--yes-always` (it asks
with an explicit yes required), so a `Shell` turn is for OpenCode: OpenCode
1.18 (a provider with `"npm": "@ai-sdk/openai-compatible"` whose
`options.baseURL` is this stub) streams every request, offers its shell as
the `bash` tool ({command, description}), and first asks for a title for the
session (not a turn: answered "Stub title").

    with ChatStub([Say(whole("hello.txt", "hello\\n"))]) as stub:
        env = stub.env(home)      # also writes home/.aider.model.metadata.json
    with ChatStub([Shell("git commit -am x"), Say("ok")]) as stub:
        env = stub.opencode_env(home)  # writes home/.config/opencode/opencode.json
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from support.scripted_http import Fail, Handler, Request, Say, Shell, Stub, Turn, words

__all__ = [
    "MODEL",
    "ChatStub",
    "Fail",
    "PiRateLimit",
    "RateLimit",
    "Say",
    "ServerError",
    "Shell",
    "pi_env",
    "whole",
]

MODEL = "stub-model"
USAGE = {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}
# $ per token, so a Run's cost is a figure aider prints: 1234 in, 56 out = $0.0018
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-5}
COMMIT_PROMPT = "generates concise, one-line Git commit messages"
TITLE_PROMPT = "You are a title generator"
# OpenCode's model costs are $ per million tokens: 1234 in, 56 out = $0.00179
OPENCODE_COST = {"input": 1.0, "output": 10.0}


def whole(path: str, content: str, say: str = "Here it is.") -> str:
    """A reply in aider's "whole" edit format: the file's path, then all of it fenced."""
    return f"{say}\n\n{path}\n```\n{content}```\n"


def RateLimit(times: int = 1, retry_after_ms: int | None = None) -> Fail:
    """OpenAI's per-day request limit, as its API words it (with a reset in 7m12s);
    `retry_after_ms`: the header that sets OpenCode's wait before its own retries."""
    message = (
        "Rate limit reached for stub-model in organization org-stub on requests per day "
        "(RPD): Limit 200, Used 200, Requested 1. Please try again in 7m12s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more."
    )
    return Fail(
        429,
        {
            "error": {
                "message": message,
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        times,
        headers=(("retry-after-ms", str(retry_after_ms)),) if retry_after_ms is not None else (),
    )


def ServerError(times: int = 1) -> Fail:
    return Fail(500, {"error": {"message": "stub failed", "type": "server_error"}}, times)


def _data(chunk: dict) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _first_says(req: Request, words: str) -> bool:
    body = req.body if isinstance(req.body, dict) else {}
    first = (body.get("messages") or [{}])[0]
    return isinstance(first, dict) and words in str(first.get("content"))


def _is_commit_message(req: Request) -> bool:
    return _first_says(req, COMMIT_PROMPT)


def _is_turn(req: Request) -> bool:
    return (
        req.method == "POST"
        and req.path.split("?")[0].endswith("/chat/completions")
        and not _is_commit_message(req)
        and not _first_says(req, TITLE_PROMPT)
    )


def _shell_call(h: Handler, req: Request, command: str) -> None:
    """A streamed call of the shell tool the CLI offered (OpenCode's `bash`)."""
    body = req.body if isinstance(req.body, dict) else {}
    names = [
        (t.get("function") or {}).get("name")
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    name = "bash" if "bash" in names or not names else str(names[0])
    args = json.dumps({"command": command, "description": "Run the command"})
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "model": MODEL}
    call = {"index": 0, "id": f"call_{len(h.state.requests)}", "type": "function"}
    chunks = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [{**call, "function": {"name": name, "arguments": args}}],
                    },
                }
            ],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": USAGE},
    ]
    h.send_sse([f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"])


def _answer(h: Handler, req: Request, text: str, over: float = 0.0) -> None:
    streamed = isinstance(req.body, dict) and bool(req.body.get("stream"))
    made = int(time.time())
    if not streamed:
        h.send_json(
            200,
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "created": made,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            },
        )
        return
    base = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": made,
        "model": MODEL,
    }
    end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE}
    if over > 0:
        pieces = [
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": w}}]}
            for w in words(text)
        ]
        h.send_sse_slowly([], [_data(c) for c in pieces], [_data(end), b"data: [DONE]\n\n"], over)
        return
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        end,
    ]
    h.send_sse([f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"])


def _play(h: Handler, req: Request, turn: Turn) -> None:
    if isinstance(turn, Shell):
        _shell_call(h, req, turn.command)
        return
    assert isinstance(turn, Say), turn
    _answer(h, req, turn.text, turn.over)


def _side(h: Handler, req: Request) -> None:
    if _first_says(req, TITLE_PROMPT):
        _answer(h, req, "Stub title")
    elif _is_commit_message(req):
        m = re.search(r"\+\+\+ b/(\S+)", req.text().replace("\\n", "\n"))
        _answer(h, req, f"Add {m.group(1) if m else 'changes'}")
    else:
        h.send_json(404, {"error": {"message": "not here"}})


class _ChatHandler(Handler):
    is_turn = staticmethod(_is_turn)
    side = staticmethod(_side)
    play = staticmethod(_play)


class ChatStub(Stub):
    handler = _ChatHandler

    def chats(self) -> list[Request]:
        """aider's chat requests (the turns), oldest first."""
        return self.turns()

    def env(self, home: Path) -> dict[str, str]:
        """What aider needs to talk to this stub, with `home` as HOME: the model
        named, its key and base URL, and its context window and prices in
        ~/.aider.model.metadata.json (so aider prints a cost, and never fetches
        litellm's price list from the network)."""
        home.mkdir(parents=True, exist_ok=True)
        meta = {
            f"openai/{MODEL}": {
                "max_input_tokens": 128000,
                "max_output_tokens": 8192,
                "litellm_provider": "openai",
                "mode": "chat",
                **PRICES,
            }
        }
        (home / ".aider.model.metadata.json").write_text(json.dumps(meta))
        return {
            "HOME": str(home),
            "AIDER_MODEL": f"openai/{MODEL}",
            "OPENAI_API_KEY": "test",
            "OPENAI_API_BASE": f"{self.url}/v1",
            "NO_COLOR": "1",
        }

    def opencode_config(self) -> dict:
        """opencode.json with this stub as its only provider and model (with
        prices, so OpenCode reports a cost), sharing and updates off."""
        return {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "stub": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Stub",
                    "options": {"baseURL": f"{self.url}/v1", "apiKey": "test"},
                    "models": {MODEL: {"name": "Stub", "cost": OPENCODE_COST}},
                }
            },
            "model": f"stub/{MODEL}",
            "autoupdate": False,
            "share": "disabled",
        }

    def opencode_env(self, home: Path) -> dict[str, str]:
        """What OpenCode needs to talk to this stub, with `home` as HOME: its
        config in ~/.config/opencode/opencode.json (the port is read from there)."""
        folder = home / ".config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps(self.opencode_config(), indent=1))
        return {"HOME": str(home), "NO_COLOR": "1"}


def PiRateLimit(times: int, seconds: int) -> Fail:
    """A provider's rate limit as the OpenAI API words it, with a reset `seconds`
    away in its words (pi passes on only the words); `retry-after-ms` keeps the
    provider SDK's own retries (two a request) quick."""
    message = (
        f"Rate limit reached for {MODEL} in organization org-stub on requests per min "
        f"(RPM): Limit 3, Used 3, Requested 1. Please try again in {seconds}s."
    )
    body = {"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}}
    return Fail(429, body, times, headers=(("retry-after-ms", "10"),))


def pi_config(stub: ChatStub) -> dict:
    """pi's models.json with this stub as its only provider and model (with
    prices, so pi reports a cost)."""
    cost = {**OPENCODE_COST, "cacheRead": 0, "cacheWrite": 0}
    return {
        "providers": {
            "stub": {
                "baseUrl": f"{stub.url}/v1",
                "api": "openai-completions",
                "apiKey": "test",
                "compat": {"supportsDeveloperRole": False},
                "models": [{"id": MODEL, "cost": cost}],
            }
        }
    }


def pi_env(stub: ChatStub, home: Path, retry_ms: int = 2000) -> dict[str, str]:
    """What pi needs to talk to this stub, with `home` as HOME: the provider in
    ~/.pi/agent/models.json (the port is read from there), the model chosen in
    its settings.json, its own retries `retry_ms` apart at first."""
    folder = home / ".pi" / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.json").write_text(json.dumps(pi_config(stub), indent=1))
    settings = {
        "defaultProvider": "stub",
        "defaultModel": MODEL,
        "retry": {"baseDelayMs": retry_ms},
    }
    (folder / "settings.json").write_text(json.dumps(settings, indent=1))
    return {"HOME": str(home), "NO_COLOR": "1"}
