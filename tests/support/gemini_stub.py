"""A Gemini API stub on 127.0.0.1 for the real Gemini CLI (see `scripted_http`).

Gemini CLI 0.61 given GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY: with model
"auto" each prompt first makes a routing call (`:generateContent`, answered
here with a JSON complexity score, not a turn), then the turn itself,
`:streamGenerateContent?alt=sse` (a text, or a `run_shell_command` call).

    with GeminiStub([Shell("git commit -am x"), Say("ok")]) as stub:
        env = stub.env(home)      # also writes home/.gemini/settings.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.scripted_http import Fail, Handler, Request, Say, Shell, Stub, Turn, words

__all__ = ["DailyQuota", "Fail", "GeminiStub", "Say", "ServerError", "Shell"]


def DailyQuota(retry_s: int = 3596) -> Fail:
    """A per-day quota: 429 RESOURCE_EXHAUSTED with a retry delay (not retried by the CLI)."""
    message = f"You have exhausted your daily quota on this model. Please retry in {retry_s}s."
    return Fail(
        429,
        {
            "error": {
                "code": 429,
                "message": message,
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{retry_s}s",
                    }
                ],
            }
        },
    )


def ServerError(times: int = 1) -> Fail:
    return Fail(
        500, {"error": {"code": 500, "message": "stub failed", "status": "INTERNAL"}}, times
    )


_USAGE = {
    "promptTokenCount": 100,
    "candidatesTokenCount": 10,
    "totalTokenCount": 110,
    "cachedContentTokenCount": 0,
}


def _chunk(parts: list[dict[str, Any]], done: bool = True) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if done:
        candidate["finishReason"] = "STOP"
    data = {
        "candidates": [candidate],
        "usageMetadata": _USAGE,
        "modelVersion": "gemini-2.5-pro",
    }
    return f"data: {json.dumps(data)}\r\n\r\n".encode()


def _play(h: Handler, req: Request, turn: Turn) -> None:
    if isinstance(turn, Shell):
        parts: list[dict[str, Any]] = [
            {"functionCall": {"name": "run_shell_command", "args": {"command": turn.command}}}
        ]
    else:
        assert isinstance(turn, Say)
        if turn.over > 0:
            said = words(turn.text)
            pieces = [_chunk([{"text": w}], done=False) for w in said[:-1]]
            h.send_sse_slowly([], pieces, [_chunk([{"text": said[-1]}])], turn.over)
            return
        parts = [{"text": turn.text}]
    h.send_sse([_chunk(parts)])


def _side(h: Handler, req: Request) -> None:
    path = req.path.split("?")[0]
    if path.endswith(":generateContent"):
        text = json.dumps({"complexity_reasoning": "a small task", "complexity_score": 10})
        h.send_json(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": _USAGE,
            },
        )
    elif path.endswith(":countTokens"):
        h.send_json(200, {"totalTokens": 100})
    else:
        h.send_json(404, {"error": {"code": 404, "message": "not here"}})


class _GeminiHandler(Handler):
    is_turn = staticmethod(
        lambda req: (
            req.method == "POST" and req.path.split("?")[0].endswith(":streamGenerateContent")
        )
    )
    side = staticmethod(_side)
    play = staticmethod(_play)


SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "privacy": {"usageStatisticsEnabled": False},
}


class GeminiStub(Stub):
    handler = _GeminiHandler

    def env(self, home: Path) -> dict[str, str]:
        """What Gemini needs to talk to this stub, with `home` as HOME (its settings written)."""
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
        return {
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": self.url,
            "GEMINI_API_KEY": "test",
            "NO_COLOR": "1",
            "GEMINI_CLI_NO_RELAUNCH": "1",
        }
