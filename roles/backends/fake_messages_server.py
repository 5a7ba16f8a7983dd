"""``FakeMessagesServer``: an Anthropic-compatible Messages API on 127.0.0.1 for tests, demos and offline runs.

``POST /v1/messages`` (JSON, or SSE with ``stream: true``) and ``POST /v1/messages/count_tokens``, answered from
a script (a queue of items, or a function of the request body), with prompt caching emulated and every request
and every message answered (usage included) recorded. Headers are checked like the API does
(``anthropic-version``; ``x-api-key`` or a bearer token); a query string such as ``?beta=true``,
``anthropic-beta`` headers and unknown body fields are accepted, so an SDK or a CLI pointed here with a base URL
works unchanged.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import socket
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import urlsplit

from evoteam.roles.backends.fake_messages_script import (
    STATUS_OF_ERROR,
    FakeFailure,
    FakeReply,
    Responder,
    ScriptItem,
    content_json,
    error_body,
    message_json,
    output_tokens,
    sse,
    stream_events,
    usage_json,
)
from evoteam.roles.backends.fake_prompt_cache import CacheRequestError, PromptCacheEmulator, request_tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    """Without the query string."""
    query: str
    headers: dict[str, str]
    """Lower-case names."""
    body: Any
    """The parsed JSON body, or ``None``."""


class FakeMessagesServer:
    def __init__(
        self,
        script: Iterable[ScriptItem] | Responder = (),
        *,
        api_key: str | None = "test-key",
        cache: PromptCacheEmulator | None = None,
        chunk_chars: int = 24,
        port: int = 0,
    ) -> None:
        """``api_key=None`` accepts any credentials (or none). ``cache`` defaults to the documented rules."""
        self._responder: Responder | None = script if callable(script) else None
        self._queue: deque[ScriptItem] = deque() if callable(script) else deque(script)
        self.api_key = api_key
        self.cache = cache or PromptCacheEmulator()
        self.chunk_chars = chunk_chars
        self.requests: list[RecordedRequest] = []
        self.replies: list[dict[str, Any]] = []
        """Every message answered (its JSON, usage included), in order; failures and cut connections are not."""
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)
        self.stopping = threading.Event()
        self._http = _HTTPServer(("127.0.0.1", port), _Handler)
        self._http.fake = self
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> FakeMessagesServer:
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-messages", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> FakeMessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def push(self, *items: ScriptItem) -> None:
        with self._lock:
            self._queue.extend(items)

    def message_bodies(self) -> list[dict[str, Any]]:
        """The bodies of every ``POST /v1/messages`` received, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/messages"]

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def usages(self) -> list[dict[str, Any]]:
        """The usage of every message answered, in order: what a client was told each call cost."""
        with self._lock:
            return [dict(m["usage"]) for m in self.replies]

    def record_reply(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.replies.append(message)

    def next_item(self, body: dict[str, Any]) -> ScriptItem | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self._responder(body) if self._responder is not None else None

    def next_message_id(self) -> str:
        with self._lock:
            return f"msg_fake_{next(self._ids):04d}"

    def next_tool_id(self) -> str:
        with self._lock:
            return f"toolu_fake_{next(self._tool_ids):04d}"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeMessagesServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("fake messages server: a client went away", exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def fake(self) -> FakeMessagesServer:
        return cast(_HTTPServer, self.server).fake

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake messages server: " + format, *args)

    def do_GET(self) -> None:
        self._record(None)
        self._error(404, "not_found_error", f"Not found: {self.path}")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self._record(body)
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._error(404, "not_found_error", f"Not found: {path}")
        if not self.headers.get("anthropic-version"):
            return self._error(400, "invalid_request_error", "anthropic-version: header is required")
        if not self._authorized():
            return self._error(401, "authentication_error", "invalid x-api-key")
        if not isinstance(body, dict):
            return self._error(400, "invalid_request_error", "The request body is not valid JSON.")
        missing = [f for f in ("model", "messages") if f not in body]
        if path == "/v1/messages" and "max_tokens" not in body:
            missing.append("max_tokens")
        if missing:
            return self._error(400, "invalid_request_error", f"{missing[0]}: Field required")
        if path == "/v1/messages/count_tokens":
            return self._json(200, {"input_tokens": request_tokens(body)})
        self._messages(body)

    def _record(self, body: Any) -> str:
        url = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.record(RecordedRequest(self.command, url.path, url.query, headers, body))
        return url.path

    def _authorized(self) -> bool:
        key = self.fake.api_key
        if key is None:
            return True
        return self.headers.get("x-api-key") == key or self.headers.get("authorization") == f"Bearer {key}"

    def _messages(self, body: dict[str, Any]) -> None:
        item = self.fake.next_item(body)
        if item is None:
            return self._error(400, "invalid_request_error", "the fake server's script has no reply left")
        if item.delay_s and self.fake.stopping.wait(item.delay_s):
            return
        if isinstance(item, FakeFailure):
            headers = dict(item.headers)
            if item.retry_after is not None:
                headers["retry-after"] = f"{item.retry_after:g}"
            return self._error(item.status, item.error_type, item.message, headers)
        try:
            account = self.fake.cache.account(body)
        except CacheRequestError as exc:
            return self._error(400, "invalid_request_error", str(exc))
        content = content_json(item, self.fake.next_tool_id)
        usage = usage_json(account, output_tokens(item, content))
        message = message_json(self.fake.next_message_id(), str(body["model"]), content, item.stop_reason, usage)
        if body.get("stream") is True:
            if item.stream_break is None:
                self.fake.record_reply(message)
            return self._stream(message, item)
        cut = item.stream_break
        if cut is None:
            self.fake.record_reply(message)
            return self._json(200, message)
        if cut.how != "error_event":
            return self._drop()
        self._error(STATUS_OF_ERROR.get(cut.error_type, 500), cut.error_type, cut.message)

    def _stream(self, message: dict[str, Any], item: FakeReply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_{message['id']}")
        self.end_headers()
        cut = item.stream_break
        for index, (name, data) in enumerate(stream_events(message, self.fake.chunk_chars)):
            if cut is not None and index == cut.after_events:
                if cut.how == "drop":
                    return self._drop()
                if cut.how == "error_event":
                    self._chunk(sse("error", error_body(cut.error_type, cut.message)))
                break
            self._chunk(sse(name, data))
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _drop(self) -> None:
        """Cuts the connection without finishing the answer."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake_{status}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, error_body(error_type, message), headers)
