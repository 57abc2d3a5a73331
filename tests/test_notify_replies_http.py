"""The reply listeners over real HTTP: an ntfy topic's stream and a Telegram
bot's long poll, served on 127.0.0.1, heard, acted on once and answered."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from owl.notify.replies import Incoming, NtfyListener, TelegramListener

T0 = time.time() - 5


class Receiver(ThreadingHTTPServer):
    """Answers GET with `stream` (ntfy's JSON lines) and POST by path: a
    Telegram `getUpdates` gets `updates` once, then nothing; every POST is kept."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.stream: list[dict] = []
        self.updates: list[dict] = []
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        self.got: list[str] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.got.append(self.path)
        self._send(b"".join(json.dumps(m).encode() + b"\n" for m in self.server.stream))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.posts.append((self.path, dict(self.headers), body))
        if self.path.endswith("/getUpdates"):
            result, self.server.updates = self.server.updates, []
            self._send(json.dumps({"ok": True, "result": result}).encode())
        else:
            self._send(b'{"ok": true, "result": {}}')


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    srv = Receiver()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def once() -> tuple[list[str], Callable[[str, str], bool]]:
    """A `remember` that lets each message through once, and what was handled."""
    seen: set = set()
    handled: list[str] = []

    def remember(channel: str, ident: str) -> bool:
        if (channel, ident) in seen:
            return False
        seen.add((channel, ident))
        return True

    return handled, remember


def test_ntfy_streams_a_reply_acts_once_and_answers_on_the_topic(receiver: Receiver) -> None:
    handled, remember = once()
    host = receiver.base.removeprefix("http://")
    lis = NtfyListener(
        f"ntfy://me:p%40ss@{host}/topic",
        started_at=T0,
        remember=remember,
        handle=lambda m: handled.append(m.text) or "done",
    )
    msg = {"id": "m1", "time": int(time.time()), "event": "message", "message": "status"}
    owls = {**msg, "id": "m2", "tags": ["owl"], "message": "Owl's own"}
    receiver.stream = [msg, owls, msg]
    lis.listen()
    assert handled == ["status"]  # once, and never Owl's own message
    assert receiver.got == [f"/topic/json?since={int(T0)}"]
    [(path, headers, body)] = receiver.posts
    assert (path, body) == ("/topic", b"done")
    assert headers["Title"] == "Owl" and headers["Tags"] == "owl"
    assert headers["Authorization"] == "Basic bWU6cEBzcw=="  # me:p@ss


def test_telegram_polls_hears_only_its_chat_and_answers_as_a_reply(receiver: Receiver) -> None:
    handled, remember = once()
    lis = TelegramListener(
        "tgram://bot123:abc/42",
        api=receiver.base,
        started_at=T0,
        remember=remember,
        handle=lambda m: handled.append(m.text) or "done",
    )
    now = int(time.time())
    receiver.updates = [
        {
            "update_id": 7,
            "message": {"message_id": 70, "chat": {"id": 42}, "text": "pause", "date": now},
        },
        {
            "update_id": 8,
            "message": {"message_id": 80, "chat": {"id": 9}, "text": "drop", "date": now},
        },
    ]
    # One poll is enough: the second finds nothing and the listener is stopped there.
    answered = lis.answer

    def answer_then_stop(msg: Incoming, text: str) -> None:
        answered(msg, text)
        lis.stop()

    lis.answer = answer_then_stop  # type: ignore[method-assign]
    lis.listen()
    assert handled == ["pause"]  # the other chat is not heard
    paths = [p for p, _, _ in receiver.posts]
    assert paths == ["/bot123:abc/getUpdates", "/bot123:abc/sendMessage"]
    poll = json.loads(receiver.posts[0][2])
    assert poll["offset"] == 0 and poll["allowed_updates"] == ["message"]
    sent = json.loads(receiver.posts[1][2])
    assert sent == {"chat_id": "42", "text": "done", "reply_to_message_id": 70}
    assert receiver.posts[1][1]["Content-Type"] == "application/json"
