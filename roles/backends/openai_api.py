"""``OpenAILLM``: the ``LLM`` Protocol over the ``openai`` SDK's Chat Completions with function calling, for any
OpenAI-compatible server (OpenAI's API, vLLM, Ollama, llama.cpp's server) at a base URL, with our own retries;
no other part of evoteam imports the SDK. ``OpenAISettings`` resolves the model, URL and key once.

Our ``Request`` becomes ``chat.completions.create``: the system parts joined as the first (``system``)
message, tool uses as the assistant's ``tool_calls`` (arguments as JSON text), tool results as ``tool``
messages (an error result starts with ``ERROR:``), tools as ``function`` tools. The provider caches prompt
prefixes itself; the cached part of a prompt (``usage.prompt_tokens_details.cached_tokens``) is charged as
cache reads. Replies are streamed by default and put together (``assemble``). Errors no retry can fix (401,
403, 404, a malformed 400) are fatal (``FatalLLMError``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

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
from evoteam.roles.backends.settings import EndpointSettings, with_environment
from evoteam.roles.llm import Block, Message, Reply, Request, TextBlock, ToolResultBlock, ToolUseBlock, Usage

log = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "gpt-5"
ENV_API_KEY = ("OPENAI_API_KEY",)
ENV_BASE_URL = ("EVOTEAM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
ENV_MODEL = ("EVOTEAM_OPENAI_MODEL",)
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
TOO_LONG = ("context_length_exceeded", "maximum context length", "context window", "too many tokens")
CHARS_PER_TOKEN = 3.5
PLACEHOLDER_KEY = "no-key"  # sent to a local server that needs no key (vLLM, Ollama, llama.cpp)
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


ENV_STREAM = ("EVOTEAM_OPENAI_STREAM",)


class OpenAISettings(EndpointSettings):
    model: str = DEFAULT_OPENAI_MODEL
    token_limit: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """The request field that carries ``max_tokens``: OpenAI's current name, or the older one some servers
    still expect."""
    stream: bool = True
    """Replies are streamed (server-sent events, usage in the last chunk): a long reply never waits on one
    response's timeout, which then bounds the pause between two chunks. Off for a server that cannot stream."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **values: Any) -> OpenAISettings:
        """Explicit ``values`` win (None counts as not given); then ``OPENAI_API_KEY``,
        ``EVOTEAM_OPENAI_BASE_URL`` or ``OPENAI_BASE_URL``, ``EVOTEAM_OPENAI_MODEL``, ``EVOTEAM_OPENAI_STREAM``
        (``0`` turns streaming off); then the defaults."""
        source = os.environ if env is None else env
        fields = (("api_key", ENV_API_KEY), ("base_url", ENV_BASE_URL), ("model", ENV_MODEL), ("stream", ENV_STREAM))
        return cls(**with_environment(values, source, fields))


class OpenAILLM:
    def __init__(
        self,
        settings: OpenAISettings,
        client: openai.OpenAI | None = None,
        *,
        sleeper: Sleeper | None = None,
        rng: random.Random | None = None,
        strict: bool = True,
    ) -> None:
        """``client``: an SDK client to use instead of one built from ``settings`` (built with
        ``max_retries=0``). ``strict``: the SDK checks every response's shape (an answer that does not fit the
        API is an error, not a half-read reply)."""
        if client is None:
            key = settings.key()
            if key is None and settings.base_url is None:
                raise ValueError("the openai backend needs an API key: set OPENAI_API_KEY, or a base URL")
            client = openai.OpenAI(
                api_key=key or PLACEHOLDER_KEY,
                base_url=settings.base_url,
                timeout=settings.timeout_s,
                max_retries=0,
                _strict_response_validation=strict,
            )
        elif client.max_retries != 0:
            raise ValueError(f"pass a client built with max_retries=0 (ours counts retries), not {client.max_retries}")
        self.settings = settings
        self._client = client
        self._secrets = [s for s in (settings.key(), client.api_key) if s and s != PLACEHOLDER_KEY]
        self.policy = RetryPolicy(
            attempts=settings.max_retries + 1, base_s=settings.retry_base_s, cap_s=settings.retry_cap_s
        )
        self.sleeper: Sleeper = sleeper or RealSleeper()
        self._rng = rng or random.Random()
        self.stats = RetryStats()

    def count_tokens(self, request: Request) -> int:
        """An estimate made offline that errs high (no tokenizer of the server's model is at hand)."""
        return estimate_tokens(to_params(request, self.settings.model, self.settings.token_limit))

    def complete(self, request: Request) -> Reply:
        params = to_params(request, self.settings.model, self.settings.token_limit)

        def attempt() -> ChatCompletion:
            if self.settings.stream:
                created = self._streamed(params)
            else:
                created = self._client.chat.completions.create(**params, timeout=self.settings.timeout_s)
            if not created.choices:
                raise openai.APIResponseValidationError(
                    response=httpx2.Response(200, request=httpx2.Request("POST", "/chat/completions")),
                    body=None,
                    message="the completion has no choices",
                )
            return created

        completion = call_with_retries(
            attempt, self._classify, self.policy, self.sleeper, self._rng, self.stats, what=f"openai {params['model']}"
        )
        return to_reply(completion, params)

    def _streamed(self, params: dict[str, Any]) -> ChatCompletion:
        """The completion streamed and put together: text, each tool call's arguments by its index, the finish
        reason, and the usage the last chunk carries (``stream_options.include_usage``)."""
        stream = self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}, timeout=self.settings.timeout_s
        )
        return assemble(stream)

    def close(self) -> None:
        self._client.close()

    def _classify(self, exc: Exception) -> Failure | None:
        failure = classify(exc, self.settings.timeout_s)
        if failure is None:
            return None
        summary = failure.summary
        for secret in self._secrets:
            summary = summary.replace(secret, "[redacted]")
        return Failure(summary, failure.retryable, failure.retry_after, failure.fatal)


def assemble(chunks: Iterable[ChatCompletionChunk]) -> ChatCompletion:
    """The ``ChatCompletion`` a stream of chunks adds up to."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    ident, model, created = "", "", 0
    for chunk in chunks:
        ident, model, created = chunk.id or ident, chunk.model or model, chunk.created or created
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "type": "function", "name": "", "arguments": ""})
                call["id"] = piece.id or call["id"]
                if piece.function is not None:
                    call["name"] += piece.function.name or ""
                    call["arguments"] += piece.function.arguments or ""
            finish = choice.finish_reason or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    choices = [{"index": 0, "message": message, "finish_reason": finish or "stop"}] if (text or calls or finish) else []
    body = {"id": ident, "object": "chat.completion", "created": created, "model": model, "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return ChatCompletion.model_validate(body)


def to_params(request: Request, default_model: str, token_limit: str = "max_completion_tokens") -> dict[str, Any]:
    """The Chat Completions arguments of ``request``."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(part for part in request.system if part)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        messages += _messages(message)
    params: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": messages,
        token_limit: request.max_tokens,
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def _messages(message: Message) -> list[dict[str, Any]]:
    """One of our messages as Chat Completions messages: tool results become ``tool`` messages (first, as the
    API wants them right after the assistant's calls), the rest one ``user`` or ``assistant`` message."""
    out: list[dict[str, Any]] = []
    texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
    if message.role == "assistant":
        calls = [
            {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
            for b in message.content
            if isinstance(b, ToolUseBlock)
        ]
        said: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
        if calls:
            said["tool_calls"] = calls
        return [said]
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            content = f"ERROR: {block.content}" if block.is_error else block.content
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
    if texts or not out:
        out.append({"role": "user", "content": "\n".join(texts) if texts else "(empty)"})
    return out


def estimate_tokens(params: dict[str, Any]) -> int:
    """About 3.5 characters a token over the JSON of the messages and tools, plus a little per message."""
    size = sum(len(json.dumps(params.get(k, []), ensure_ascii=False)) for k in ("messages", "tools"))
    return math.ceil(size / CHARS_PER_TOKEN) + 8 * len(params.get("messages", [])) + 16


def to_reply(completion: ChatCompletion, params: dict[str, Any]) -> Reply:
    choice = completion.choices[0]
    blocks: list[Block] = []
    if choice.message.content:
        blocks.append(TextBlock(text=choice.message.content))
    for call in choice.message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: none are offered
            continue
        try:
            arguments = json.loads(function.arguments or "{}")
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):  # the tool refuses it, and says why, to the model
            arguments = {"arguments_not_a_json_object": function.arguments}
        blocks.append(ToolUseBlock(id=call.id, name=function.name, input=arguments))
    return Reply(
        content=blocks,
        stop_reason=STOP_REASONS.get(choice.finish_reason, choice.finish_reason),
        usage=_usage(completion, params, blocks),
        model=completion.model,
    )


def _usage(completion: ChatCompletion, params: dict[str, Any], blocks: list[Block]) -> Usage:
    """The provider's count, its cached prompt tokens as cache reads; a server that reports none is charged
    our estimate (input from the request, output from the reply), never nothing."""
    u = completion.usage
    if u is None:
        log.warning("%s reported no token usage; charging an estimate", completion.model)
        out = sum(len(b.text) if isinstance(b, TextBlock) else len(json.dumps(b.model_dump())) for b in blocks)
        return Usage(input_tokens=estimate_tokens(params), output_tokens=math.ceil(out / CHARS_PER_TOKEN))
    cached = (u.prompt_tokens_details.cached_tokens or 0) if u.prompt_tokens_details is not None else 0
    cached = min(cached, u.prompt_tokens)
    return Usage(
        input_tokens=u.prompt_tokens - cached, output_tokens=u.completion_tokens, cache_read_input_tokens=cached
    )


def classify(exc: Exception, timeout_s: float) -> Failure | None:
    """What one failed attempt means: retryable, final, or fatal for the run; ``None`` for an exception that is
    not a failure of the service."""
    if isinstance(exc, openai.APITimeoutError):
        return Failure(f"timed out after {timeout_s:g}s", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure(f"connection error: {exc.message}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        text = f"{exc.status_code} {exc.code or exc.type or 'error'}: {_message(exc)}"
        retryable = exc.status_code in RETRY_STATUS
        fatal = is_fatal(exc.status_code, f"{exc.code} {_message(exc)}", TOO_LONG)
        return Failure(text, retryable, retry_after(exc.response.headers.get), fatal=fatal)
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure(f"the response does not have the API's shape: {exc.message}", retryable=False)
    if isinstance(exc, httpx2.TimeoutException):
        return Failure(f"timed out after {timeout_s:g}s", retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure(f"the connection broke: {exc}", retryable=True)
    return None


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return exc.message
