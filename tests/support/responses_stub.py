"""A Responses API stub on 127.0.0.1 for the real Codex CLI (see `scripted_http`).

Codex 0.171 POSTs `{base_url}/responses` (base_url from a model provider in
`$CODEX_HOME/config.toml`; it ignores OPENAI_BASE_URL) and reads SSE:
`response.created`, `response.output_item.done` (a message, or a function
call to its shell tool), `response.completed` with `usage`.

    with ResponsesStub([Shell("git commit -am x"), Say("ok")]) as stub:
        env = stub.env(codex_home)
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from support.scripted_http import Fail, Handler, Request, Say, Shell, Stub, Turn, words

__all__ = [
    "MODEL",
    "Fail",
    "ResponsesStub",
    "Say",
    "ServerError",
    "Shell",
    "UsageLimit",
    "Windows",
]

MODEL = "gpt-5.1-codex"
_ids = itertools.count(1)


def UsageLimit(reset_in: float = 3600.0) -> Fail:
    """A ChatGPT plan's usage limit: 429 usage_limit_reached with resets_at (not retried)."""
    return Fail(
        429,
        {
            "error": {
                "type": "usage_limit_reached",
                "message": "usage limit",
                "plan_type": "plus",
                "resets_at": "{reset}",
            }
        },
        reset_in=reset_in,
    )


def Windows(
    primary: tuple[float, float, float] | None = None,
    secondary: tuple[float, float, float] | None = None,
) -> tuple[tuple[str, str], ...]:
    """The rate-limit headers Codex reads from every answer (the names are the
    CLI's own, from its binary): each window's (used percent 0..100, window
    minutes, reset epoch second); primary is the 5-hour window, secondary the week."""
    out: list[tuple[str, str]] = []
    for name, window in (("primary", primary), ("secondary", secondary)):
        if window is None:
            continue
        used, minutes, reset = window
        out += [
            (f"x-codex-{name}-used-percent", f"{used:g}"),
            (f"x-codex-{name}-window-minutes", str(int(minutes))),
            (f"x-codex-{name}-reset-at", str(int(reset))),
        ]
    return tuple(out)


def ServerError(times: int = 1) -> Fail:
    return Fail(500, {"error": {"type": "server_error", "message": "stub failed"}}, times)


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _shell_tool(body: Any) -> tuple[str, bool]:
    """The name of the shell tool the CLI offered, and whether it takes a string
    command (`exec_command`/`shell_command`) rather than an argv list."""
    names = (
        [t.get("name") for t in (body.get("tools") or []) if isinstance(t, dict)]
        if isinstance(body, dict)
        else []
    )
    for name, as_text in (("shell_command", True), ("exec_command", True), ("shell", False)):
        if name in names:
            return name, as_text
    return "shell", False


def _play(h: Handler, req: Request, turn: Turn) -> None:
    n = next(_ids)
    if isinstance(turn, Shell):
        name, as_text = _shell_tool(req.body)
        key = "cmd" if name == "exec_command" else "command"
        args = {key: turn.command} if as_text else {"command": ["bash", "-lc", turn.command]}
        item = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": name,
            "arguments": json.dumps(args),
        }
    else:
        assert isinstance(turn, Say)
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "content": [{"type": "output_text", "text": turn.text}],
        }
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 20},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    head = [_sse({"type": "response.created", "response": {"id": f"resp_{n}"}})]
    tail = [
        _sse({"type": "response.output_item.done", "output_index": 0, "item": item}),
        _sse({"type": "response.completed", "response": {"id": f"resp_{n}", "usage": usage}}),
    ]
    if isinstance(turn, Say) and turn.over > 0:
        pieces = [
            _sse(
                {
                    "type": "response.output_text.delta",
                    "item_id": f"msg_{n}",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": w,
                }
            )
            for w in words(turn.text)
        ]
        h.send_sse_slowly(head, pieces, tail, turn.over)
        return
    h.send_sse(head + tail)


def _side(h: Handler, req: Request) -> None:
    if req.path.split("?")[0].endswith("/models"):
        h.send_json(200, {"models": []})
    else:
        h.send_json(404, {"error": {"message": "not here"}})


class _ResponsesHandler(Handler):
    is_turn = staticmethod(
        lambda req: req.method == "POST" and req.path.split("?")[0].endswith("/responses")
    )
    side = staticmethod(_side)
    play = staticmethod(_play)


class ResponsesStub(Stub):
    handler = _ResponsesHandler

    def config(self) -> str:
        """config.toml for a CODEX_HOME that talks to this stub."""
        return (
            f'model = "{MODEL}"\nmodel_provider = "stub"\n'
            '[model_providers.stub]\nname = "stub"\n'
            f'base_url = "{self.url}/v1"\nenv_key = "OWL_STUB_KEY"\nwire_api = "responses"\n'
        )

    def env(self, codex_home: Path) -> dict[str, str]:
        """What Codex needs to talk to this stub: a CODEX_HOME with its config."""
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(self.config())
        return {"CODEX_HOME": str(codex_home), "OWL_STUB_KEY": "test", "NO_COLOR": "1"}
