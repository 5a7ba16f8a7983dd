"""What the fake Messages server answers: scripted replies (text, tool use), HTTP failures, mid-stream errors
and dropped streams, delays; and the Anthropic-shaped JSON and SSE events made from them. No I/O here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.backends.fake_prompt_cache import CacheAccount


class FakeText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"] = "text"
    text: str


class FakeToolUse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["tool_use"] = "tool_use"
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    """``None``: the server numbers it (``toolu_fake_0001``, ...)."""


class StreamBreak(BaseModel):
    """How a streamed reply fails after ``after_events`` events: ``error_event`` sends an ``error`` event of
    ``error_type`` and ends the stream, ``drop`` cuts the connection, ``end`` ends the stream cleanly but early
    (no ``message_delta``/``message_stop``). A non-streaming request gets the matching HTTP error for
    ``error_event``, and a connection closed without an answer otherwise."""

    model_config = ConfigDict(extra="forbid")
    after_events: int = Field(default=3, ge=0)
    how: Literal["error_event", "drop", "end"] = "error_event"
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


class FakeReply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: list[FakeText | FakeToolUse]
    stop_reason: str = "end_turn"
    output_tokens: int | None = None
    """``None``: about four characters a token over the content."""
    delay_s: float = Field(default=0.0, ge=0)
    stream_break: StreamBreak | None = None


class FakeFailure(BaseModel):
    """An HTTP error with an Anthropic error body (and ``retry-after`` when given)."""

    model_config = ConfigDict(extra="forbid")
    status: int
    error_type: str
    message: str
    retry_after: float | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    delay_s: float = Field(default=0.0, ge=0)


ScriptItem = FakeReply | FakeFailure
Responder = Callable[[dict[str, Any]], ScriptItem]
"""A script as a function of the request body."""

STATUS_OF_ERROR = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def text(message: str, **fields: Any) -> FakeReply:
    return FakeReply(content=[FakeText(text=message)], **fields)


def tool_use(name: str, arguments: dict[str, Any], call_id: str | None = None, say: str = "") -> FakeReply:
    blocks: list[FakeText | FakeToolUse] = [FakeText(text=say)] if say else []
    blocks.append(FakeToolUse(name=name, input=arguments, id=call_id))
    return FakeReply(content=blocks, stop_reason="tool_use")


def rate_limited(retry_after: float = 1.0) -> FakeFailure:
    return FakeFailure(
        status=429, error_type="rate_limit_error", message="Number of requests has exceeded your rate limit",
        retry_after=retry_after,
    )  # fmt: skip


def overloaded() -> FakeFailure:
    return FakeFailure(status=529, error_type="overloaded_error", message="Overloaded")


def server_error(status: int = 500) -> FakeFailure:
    return FakeFailure(status=status, error_type="api_error", message="Internal server error")


def mid_stream_error(
    reply: FakeReply | None = None, after_events: int = 3, error_type: str = "overloaded_error"
) -> FakeReply:
    return _broken(reply, StreamBreak(after_events=after_events, error_type=error_type))


def dropped_stream(reply: FakeReply | None = None, after_events: int = 3) -> FakeReply:
    return _broken(reply, StreamBreak(after_events=after_events, how="drop"))


def truncated_stream(reply: FakeReply | None = None, after_events: int = 3) -> FakeReply:
    return _broken(reply, StreamBreak(after_events=after_events, how="end"))


def _broken(reply: FakeReply | None, how: StreamBreak) -> FakeReply:
    base = reply or text("This reply is cut short before it ends, so its sender must ask again.")
    return base.model_copy(update={"stream_break": how})


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def usage_json(account: CacheAccount, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": account.input_tokens,
        "cache_creation_input_tokens": account.cache_creation_input_tokens,
        "cache_read_input_tokens": account.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": account.ephemeral_5m_input_tokens,
            "ephemeral_1h_input_tokens": account.ephemeral_1h_input_tokens,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def content_json(reply: FakeReply, next_tool_id: Callable[[], str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in reply.content:
        if isinstance(block, FakeText):
            blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {"type": "tool_use", "id": block.id or next_tool_id(), "name": block.name, "input": block.input}
            )
    return blocks


def output_tokens(reply: FakeReply, content: list[dict[str, Any]]) -> int:
    if reply.output_tokens is not None:
        return reply.output_tokens
    return max(1, -(-len(json.dumps(content)) // 4))


def message_json(
    message_id: str, model: str, content: list[dict[str, Any]], stop_reason: str | None, usage: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


DELTA_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def stream_events(message: dict[str, Any], chunk_chars: int = 24) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a finished message, in the API's order: ``message_start`` (empty content, usage with
    the input counters), ``ping``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
    ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop reason, usage), ``message_stop``."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _chunks(block["text"], chunk_chars)]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            pieces = ["", *_chunks(json.dumps(block["input"]), chunk_chars)]
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}))
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    final = {k: usage[k] for k in DELTA_USAGE_FIELDS if k in usage}  # cumulative, as the API sends them
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": final}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]
