"""Local stand-ins for the services Owl's channels talk to, on 127.0.0.1.

- `Receiver`: any HTTP endpoint (Apprise's `json://` posts here); it can be
  told to answer 500 (`fail`) or to hold every request open (`hang`).
- `NtfyServer`: ntfy's publish API (`POST /` with JSON naming the topic, as
  Apprise's ntfy plugin sends; `POST /TOPIC` with a text body, as Owl's
  acknowledgements and the phone app send) and its JSON stream
  (`GET /TOPIC/json?since=…`: the stored messages after `since`, then each new
  one as it comes, one JSON object a line, with keepalives).
- `TelegramServer`: the two Bot API methods Owl uses, `getUpdates` (a long
  poll honouring `offset` and `timeout`) and `sendMessage` (recorded).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server:
    handler: type[BaseHTTPRequestHandler]

    def __init__(self) -> None:
        outer = self

        class Handler(self.handler):  # type: ignore[misc, valid-type]
            server_side = outer

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.cv = threading.Condition()
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "_Server":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.cv:
            self.closing = True
            self.cv.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    closing = False

    def wait(self, pred: Any, timeout: float = 10.0) -> Any:
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                got = pred()
                if got or time.monotonic() > end:
                    return got
                self.cv.wait(max(0.01, min(0.5, end - time.monotonic())))


class _ReceiverHandler(BaseHTTPRequestHandler):
    server_side: "Receiver"

    def do_POST(self) -> None:
        side = self.server_side
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with side.cv:
            side.requests += 1
            side.cv.notify_all()
        if side.mode == "hang":
            with side.cv:
                side.cv.wait_for(lambda: side.mode != "hang" or side.closing, timeout=120)
        if side.mode == "fail":
            self.send_response(500)
            self.end_headers()
            return
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {"raw": body.decode(errors="replace")}
        with side.cv:
            side.got.append({"path": self.path, "body": doc})
            side.cv.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")


class Receiver(_Server):
    handler = _ReceiverHandler

    def __init__(self, mode: str = "ok") -> None:
        super().__init__()
        self.mode = mode
        self.got: list[dict] = []
        self.requests = 0

    def url(self, path: str = "owl") -> str:
        return f"json://127.0.0.1:{self.port}/{path}"

    def set_mode(self, mode: str) -> None:
        with self.cv:
            self.mode = mode
            self.cv.notify_all()


class _NtfyHandler(BaseHTTPRequestHandler):
    server_side: "NtfyServer"
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        side = self.server_side
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urllib.parse.urlsplit(self.path).path.strip("/")
        if path:
            tags = [
                t
                for t in (self.headers.get("Tags") or self.headers.get("X-Tags") or "").split(",")
                if t
            ]
            msg = side.publish(
                path, body.decode(), title=self.headers.get("Title") or "", tags=tags
            )
        else:
            doc = json.loads(body)
            msg = side.publish(
                doc["topic"],
                doc.get("message", ""),
                title=doc.get("title", ""),
                tags=doc.get("tags") or [],
            )
        out = json.dumps(msg).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self) -> None:
        side = self.server_side
        parts = urllib.parse.urlsplit(self.path)
        topic, _, kind = parts.path.strip("/").partition("/")
        if kind != "json":
            self.send_response(404)
            self.end_headers()
            return
        since = urllib.parse.parse_qs(parts.query).get("since", ["0"])[0]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def line(obj: dict) -> None:
            self.wfile.write(json.dumps(obj).encode() + b"\n")
            self.wfile.flush()

        with side.cv:
            side.subscribers += 1
            side.cv.notify_all()
            kept = side.after(topic, since)
            sent = len(side.messages)
        try:
            line(
                {
                    "id": secrets.token_hex(6),
                    "time": int(time.time()),
                    "event": "open",
                    "topic": topic,
                }
            )
            for m in kept:
                line(m)
            while True:
                with side.cv:
                    side.cv.wait_for(
                        lambda: len(side.messages) > sent or side.closing or side.drop_streams,
                        timeout=1.0,
                    )
                    if side.closing or side.drop_streams:
                        return
                    new = [m for m in side.messages[sent:] if m["topic"] == topic]
                    sent = len(side.messages)
                for m in new:
                    line(m)
                if not new:
                    line(
                        {
                            "id": secrets.token_hex(6),
                            "time": int(time.time()),
                            "event": "keepalive",
                            "topic": topic,
                        }
                    )
        except OSError:
            return
        finally:
            with side.cv:
                side.subscribers -= 1
                side.cv.notify_all()


class NtfyServer(_Server):
    handler = _NtfyHandler

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[dict] = []
        self.subscribers = 0
        self.drop_streams = False

    def url(self, topic: str = "owl-secret-topic") -> str:
        return f"ntfy://127.0.0.1:{self.port}/{topic}"

    def publish(
        self,
        topic: str,
        message: str,
        *,
        title: str = "",
        tags: list | None = None,
        at: float | None = None,
    ) -> dict:
        msg = {
            "id": secrets.token_hex(6),
            "time": int(time.time() if at is None else at),
            "event": "message",
            "topic": topic,
            "message": message,
        }
        if title:
            msg["title"] = title
        if tags:
            msg["tags"] = list(tags)
        with self.cv:
            self.messages.append(msg)
            self.cv.notify_all()
        return msg

    def after(self, topic: str, since: str) -> list[dict]:
        """Stored messages after `since` (an id, or a unix time), as ntfy answers."""
        mine = [m for m in self.messages if m["topic"] == topic]
        ids = [m["id"] for m in mine]
        if since in ids:
            return mine[ids.index(since) + 1 :]
        if since.isdigit():
            return [m for m in mine if m["time"] >= int(since)]
        return mine if since == "all" else []

    def on(self, topic: str) -> list[dict]:
        with self.cv:
            return [m for m in self.messages if m["topic"] == topic]


class _TelegramHandler(BaseHTTPRequestHandler):
    server_side: "TelegramServer"

    def do_POST(self) -> None:
        side = self.server_side
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            args = json.loads(body) if body else {}
        except ValueError:
            args = dict(urllib.parse.parse_qsl(body.decode()))
        path = urllib.parse.urlsplit(self.path).path
        token, _, method = path.strip("/").partition("/")
        if token != f"bot{side.token}":
            return self._answer(
                401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
            )
        if method == "getUpdates":
            offset = int(args.get("offset") or 0)
            wait = min(float(args.get("timeout") or 0), 30.0)
            with side.cv:
                side.polls += 1
                side.cv.notify_all()
                side.cv.wait_for(
                    lambda: side.closing or any(u["update_id"] >= offset for u in side.updates),
                    timeout=wait,
                )
                out = [u for u in side.updates if u["update_id"] >= offset]
            return self._answer(200, {"ok": True, "result": out})
        if method == "sendMessage":
            with side.cv:
                side.sent.append(args)
                side.cv.notify_all()
            return self._answer(
                200,
                {
                    "ok": True,
                    "result": {
                        "message_id": side.next_message_id(),
                        "chat": {"id": args.get("chat_id")},
                        "text": args.get("text"),
                        "date": int(time.time()),
                    },
                },
            )
        if method == "getMe":
            return self._answer(200, {"ok": True, "result": {"id": 1, "is_bot": True}})
        return self._answer(404, {"ok": False, "description": "Not Found"})

    do_GET = do_POST

    def _answer(self, code: int, doc: dict) -> None:
        out = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


class TelegramServer(_Server):
    handler = _TelegramHandler

    def __init__(self, token: str = "123456:test-token", chat: int = 4242) -> None:
        super().__init__()
        self.token, self.chat = token, chat
        self.updates: list[dict] = []
        self.sent: list[dict] = []
        self.polls = 0
        self._ids = 100

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self) -> str:
        return f"tgram://{self.token}/{self.chat}"

    def next_message_id(self) -> int:
        self._ids += 1
        return self._ids

    def say(
        self,
        text: str,
        *,
        chat: int | None = None,
        reply_to_text: str | None = None,
        at: float | None = None,
    ) -> dict:
        """A message from the person's phone (or, with `chat`, from someone else)."""
        with self.cv:
            msg: dict = {
                "message_id": self.next_message_id(),
                "chat": {"id": self.chat if chat is None else chat, "type": "private"},
                "date": int(time.time() if at is None else at),
                "text": text,
            }
            if reply_to_text is not None:
                msg["reply_to_message"] = {
                    "message_id": 1,
                    "text": reply_to_text,
                    "chat": msg["chat"],
                    "date": msg["date"],
                }
            upd = {"update_id": 1000 + len(self.updates), "message": msg}
            self.updates.append(upd)
            self.cv.notify_all()
            return upd
