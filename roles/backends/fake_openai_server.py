"""``FakeOpenAIServer``: an OpenAI-compatible Chat Completions API on 127.0.0.1 for tests and offline demos.

``POST /v1/chat/completions`` answered from a script (a queue of items, or a function of the request body): a
reply (text, function calls) or a failure (status, code, message, ``retry-after``). A request with ``stream``
gets the reply as server-sent events in the API's chunk format (text and each call's arguments in pieces, the
finish reason, then the usage when ``stream_options.include_usage`` asks for it, then ``[DONE]``); a script item
can break the stream midway (``FakeCompletion.break_after``). The
bearer key is checked like the API does (401 ``invalid_api_key``). Usage is counted about 4 characters a
token, and prompt caching is emulated as OpenAI documents it: a prompt of 1024 tokens or more reads from the
cache the longest prefix of whole messages (with the tools) that an earlier request sent, in 128-token steps.
Every request and every completion answered are recorded.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

CACHE_MIN_TOKENS = 1024
CACHE_STEP = 128


class FakeCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: str
    """The arguments as the model wrote them (JSON text, or not)."""


class FakeCompletion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str | None = None
    calls: list[FakeCall] = Field(default_factory=list)
    finish_reason: str | None = None
    """Default: ``tool_calls`` with calls, else ``stop``."""
    usage: bool = True
    """False: the answer carries no ``usage`` (some servers send none)."""
    break_after: int | None = None
    """Streamed: the connection is cut after this many chunks (a dropped stream)."""


class FakeError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: int
    code: str | None = None
    message: str = "error"
    retry_after: float | None = None


ScriptItem = FakeCompletion | FakeError | dict[str, Any]
"""A completion, a failure, or a raw JSON body answered with 200 as it is (to test the SDK's validation)."""
Responder = Callable[[dict[str, Any]], ScriptItem]


def say(text: str) -> FakeCompletion:
    return FakeCompletion(content=text)


def call(name: str, arguments: dict[str, Any] | str, text: str | None = None) -> FakeCompletion:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return FakeCompletion(content=text, calls=[FakeCall(name=name, arguments=raw)])


def tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value, ensure_ascii=False)) / 4)


class FakeOpenAIServer:
    def __init__(self, script: Iterable[ScriptItem] | Responder = (), *, api_key: str | None = "test-key") -> None:
        """``api_key=None`` accepts any key (or none)."""
        self._responder: Responder | None = script if callable(script) else None
        self._queue: deque[ScriptItem] = deque() if callable(script) else deque(script)
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        """Every request body, in order (a refused one too)."""
        self.replies: list[dict[str, Any]] = []
        """Every completion answered (its JSON, usage included), in order."""
        self._prefixes: list[list[Any]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.fake = self
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def push(self, *items: ScriptItem) -> None:
        with self._lock:
            self._queue.extend(items)

    def next_item(self, body: dict[str, Any]) -> ScriptItem:
        if self._responder is not None:
            return self._responder(body)
        with self._lock:
            if not self._queue:
                return FakeError(status=500, code="script_exhausted", message="the fake server's script is empty")
            return self._queue.popleft()

    def usage(self, body: dict[str, Any], completion: FakeCompletion) -> dict[str, Any]:
        """Tokens of the prompt (messages and tools) and of the answer; the cached part of the prompt."""
        parts = [body.get("tools", []), *body.get("messages", [])]
        prompt = sum(tokens(p) for p in parts)
        with self._lock:
            shared = max((_common(parts, earlier) for earlier in self._prefixes), default=0)
            self._prefixes.append(parts)
        cached = 0
        if prompt >= CACHE_MIN_TOKENS:
            cached = (sum(tokens(p) for p in parts[:shared]) // CACHE_STEP) * CACHE_STEP
        answer = tokens(completion.content or "") + sum(tokens(c.model_dump()) for c in completion.calls)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "total_tokens": prompt + answer,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def completion_json(self, body: dict[str, Any], completion: FakeCompletion) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": completion.content}
        if completion.calls:
            message["tool_calls"] = [
                {"id": f"call_{next(self._ids)}", "type": "function", "function": c.model_dump()}
                for c in completion.calls
            ]
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": completion.finish_reason or ("tool_calls" if completion.calls else "stop"),
                }
            ],
        }
        if completion.usage:
            reply["usage"] = self.usage(body, completion)
        with self._lock:
            self.replies.append(reply)
        return reply


def chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """``reply`` (a ``chat.completion``) as the ``chat.completion.chunk`` events a streaming server sends."""
    head = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"], "model": reply["model"]}
    choice = reply["choices"][0]
    message = choice["message"]

    def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [event({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    for start in range(0, len(content), 16):
        out.append(event({"content": content[start : start + 16]}))
    for index, tool in enumerate(message.get("tool_calls") or []):
        function = tool["function"]
        first = {
            "index": index,
            "id": tool["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        out.append(event({"tool_calls": [first]}))
        arguments = function["arguments"]
        for start in range(0, len(arguments), 16):
            piece = {"index": index, "function": {"arguments": arguments[start : start + 16]}}
            out.append(event({"tool_calls": [piece]}))
    out.append(event({}, choice["finish_reason"]))
    if include_usage and "usage" in reply:
        out.append({**head, "choices": [], "usage": reply["usage"]})
    return out


def _common(a: list[Any], b: list[Any]) -> int:
    """How many leading parts ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("fake openai server: a client went away", exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def fake(self) -> FakeOpenAIServer:
        return cast(_HTTPServer, self.server).fake

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake openai server: " + format, *args)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        with self.fake._lock:
            self.fake.requests.append(body)
        if self.path.split("?")[0] != "/v1/chat/completions":
            return self._send(404, _error("not_found", f"Not found: {self.path}", "invalid_request_error"))
        expected = self.fake.api_key
        if expected is not None and self.headers.get("authorization") != f"Bearer {expected}":
            return self._send(401, _error("invalid_api_key", "Incorrect API key provided.", "invalid_request_error"))
        item = self.fake.next_item(body)
        if isinstance(item, FakeError):
            headers = {"retry-after": f"{item.retry_after:g}"} if item.retry_after is not None else {}
            return self._send(item.status, _error(item.code, item.message, "invalid_request_error"), headers)
        if isinstance(item, dict):
            return self._send(200, item)
        reply = self.fake.completion_json(body, item)
        if body.get("stream"):
            options = body.get("stream_options") or {}
            events = chunks(reply, bool(options.get("include_usage")))
            return self._stream(events[: item.break_after] if item.break_after is not None else events, item)
        return self._send(200, reply)

    def _stream(self, events: list[dict[str, Any]], item: FakeCompletion) -> None:
        lines = [f"data: {json.dumps(e)}\n\n" for e in events]
        if item.break_after is None:
            lines.append("data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        if item.break_after is None:
            data = "".join(lines).encode()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("connection", "close")  # a dropped stream: what was sent, then the connection goes
        self.send_header("content-length", str(len("".join(lines).encode()) + 4096))
        self.end_headers()
        self.wfile.write("".join(lines).encode())
        self.wfile.flush()
        self.close_connection = True

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _error(code: str | None, message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
