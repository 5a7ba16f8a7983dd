"""``AnthropicLLM``: the ``LLM`` Protocol over the real ``anthropic`` SDK, with prompt-cache breakpoints,
streaming for long outputs, and our own retries; no other part of evoteam imports the SDK.

Our ``Request`` becomes ``messages.create`` (or ``messages.stream`` when ``max_tokens`` reaches the settings'
threshold). Cache breakpoints: the last system part (the stable prefix: system prompt, role prompt, task,
knowledge; tools come before it and are covered too) and the last block of the last message, so each turn
reads the conversation so far from the cache. The API key goes into the client and nowhere else.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message as SDKMessage

from evoteam.roles.backends.retry import (
    Failure,
    RealSleeper,
    RetryPolicy,
    RetryStats,
    Sleeper,
    call_with_retries,
    is_fatal,
    retry_after,
)
from evoteam.roles.backends.settings import AnthropicSettings
from evoteam.roles.llm import Block, Message, Reply, Request, TextBlock, ToolResultBlock, ToolUseBlock, Usage

log = logging.getLogger(__name__)

EPHEMERAL = {"type": "ephemeral"}
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})
RETRY_ERROR_TYPES = frozenset({"rate_limit_error", "overloaded_error", "api_error", "timeout_error"})
CHARS_PER_TOKEN = 3.5
PLACEHOLDER_KEY = "no-key"  # sent to a server at base_url when no key is set; such servers ignore it


class StreamIncomplete(Exception):
    """A stream ended before the message was finished (no stop reason): the call is retried."""


class AnthropicLLM:
    def __init__(
        self,
        settings: AnthropicSettings,
        client: anthropic.Anthropic | None = None,
        *,
        sleeper: Sleeper | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``client``: an SDK client to use instead of one built from ``settings``; it must be built with
        ``max_retries=0`` (our loop retries, counts and logs)."""
        if client is None:
            key = settings.key()
            if key is None and settings.base_url is None:
                raise ValueError("the anthropic backend needs an API key: set ANTHROPIC_API_KEY or settings.api_key")
            client = anthropic.Anthropic(
                api_key=key or PLACEHOLDER_KEY, base_url=settings.base_url, timeout=settings.timeout_s, max_retries=0
            )
        elif client.max_retries != 0:
            raise ValueError(f"pass a client built with max_retries=0 (ours counts retries), not {client.max_retries}")
        self.settings = settings
        self._client = client
        self._secrets = [s for s in (settings.key(), client.api_key, client.auth_token) if s]
        self.policy = RetryPolicy(
            attempts=settings.max_retries + 1, base_s=settings.retry_base_s, cap_s=settings.retry_cap_s
        )
        self.sleeper: Sleeper = sleeper or RealSleeper()
        self._rng = rng or random.Random()
        self.stats = RetryStats()

    def count_tokens(self, request: Request) -> int:
        """An estimate made offline that errs high; the API's count when ``settings.exact_count`` is on (falling
        back to the estimate if that call fails)."""
        params = to_params(request, self.settings.model)
        if self.settings.exact_count:
            counted = {k: v for k, v in params.items() if k in ("model", "system", "messages", "tools")}
            try:
                return self._client.messages.count_tokens(**counted, timeout=self.settings.timeout_s).input_tokens
            except anthropic.APIError as exc:
                log.warning("token counting failed, estimating instead: %s", self._redact(_describe(exc)))
        return estimate_tokens(params)

    def complete(self, request: Request) -> Reply:
        params = to_params(request, self.settings.model)
        stream = request.max_tokens >= self.settings.stream_threshold

        def attempt() -> SDKMessage:
            if stream:
                with self._client.messages.stream(**params, timeout=self.settings.timeout_s) as events:
                    message: SDKMessage = events.get_final_message()
                if message.stop_reason is None:
                    raise StreamIncomplete("the stream ended before the message was complete")
                return message
            created: SDKMessage = self._client.messages.create(**params, timeout=self.settings.timeout_s)
            return created

        started = time.monotonic()
        message = call_with_retries(
            attempt,
            self._classify,
            self.policy,
            self.sleeper,
            self._rng,
            self.stats,
            what=f"anthropic {params['model']}",
        )
        reply = to_reply(message)
        log.debug(
            "anthropic %s: %s in %.1fs, usage %s",
            reply.model,
            reply.stop_reason,
            time.monotonic() - started,
            reply.usage,
        )
        return reply

    def close(self) -> None:
        self._client.close()

    def _classify(self, exc: Exception) -> Failure | None:
        failure = classify(exc, self.settings.timeout_s)
        if failure is None:
            return None
        return Failure(self._redact(failure.summary), failure.retryable, failure.retry_after, failure.fatal)

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text


def to_params(request: Request, default_model: str) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request``, with the cache breakpoints placed."""
    system: list[dict[str, Any]] = [{"type": "text", "text": part} for part in request.system if part]
    if system:
        system[-1]["cache_control"] = dict(EPHEMERAL)
    if len(system) > 1:  # before the last part (the knowledge, which changes most): reused by the role's next agent
        system[-2]["cache_control"] = dict(EPHEMERAL)
    contents = [_content(m) for m in request.messages]
    if contents:
        contents[-1][-1]["cache_control"] = dict(EPHEMERAL)
    messages = [{"role": m.role, "content": c} for m, c in zip(request.messages, contents, strict=True)]
    params: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
        ]
    if request.temperature is not None:
        params["extra_body"] = {"temperature": request.temperature}  # not a named argument of this SDK
    return params


def estimate_tokens(params: dict[str, Any]) -> int:
    """About 3.5 characters a token over the JSON of system, messages and tools, plus a little per message:
    keys, quotes and escapes pad the count, so it errs high for prose and code. An estimate, not a tokenizer."""
    size = sum(len(json.dumps(params.get(k, []), ensure_ascii=False)) for k in ("system", "messages", "tools"))
    return math.ceil(size / CHARS_PER_TOKEN) + 8 * len(params.get("messages", [])) + 16


def to_reply(message: SDKMessage) -> Reply:
    blocks: list[Block] = []
    for block in message.content:
        if block.type == "text":
            blocks.append(TextBlock(text=block.text))
        elif block.type == "tool_use":
            blocks.append(ToolUseBlock(id=block.id, name=block.name, input=dict(block.input)))
    u = message.usage
    usage = Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
    )
    return Reply(content=blocks, stop_reason=message.stop_reason or "end_turn", usage=usage, model=message.model)


def classify(exc: Exception, timeout_s: float) -> Failure | None:
    """What one failed attempt means: retryable or final, with the server's ``retry-after``; ``None`` for an
    exception that is not a failure of the service."""
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(f"timed out after {timeout_s:g}s", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure(f"connection error: {exc.message}", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code < 400:  # an error event in the middle of a stream (the HTTP status was 200)
            return Failure(f"error event in the stream: {_describe(exc)}", retryable=exc.type in RETRY_ERROR_TYPES)
        retryable = exc.status_code in RETRY_STATUS or exc.type == "overloaded_error"
        return Failure(
            _describe(exc),
            retryable,
            retry_after(exc.response.headers.get),
            fatal=is_fatal(exc.status_code, str(exc.api_message or exc.message), TOO_LONG),
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return Failure(f"the response does not have the API's shape: {exc.message}", retryable=False)
    if isinstance(exc, httpx2.TimeoutException):
        return Failure(f"timed out reading the stream after {timeout_s:g}s", retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure(f"the stream broke: {exc}", retryable=True)
    if isinstance(exc, StreamIncomplete):
        return Failure(str(exc), retryable=True)
    return None


TOO_LONG = ("prompt is too long", "too many tokens", "context window", "context length")


def _describe(exc: anthropic.APIError) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        status = "" if exc.status_code < 400 else f"{exc.status_code} "
        return f"{status}{exc.type or 'error'}: {exc.api_message or exc.message}"
    return exc.message


def _content(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUseBlock):
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        elif isinstance(block, ToolResultBlock):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content}
            if block.is_error:
                result["is_error"] = True
            blocks.append(result)
    return blocks or [{"type": "text", "text": "(empty)"}]
