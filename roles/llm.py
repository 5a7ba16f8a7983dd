"""The one Protocol every language-model backend implements, and the messages that cross it.

The shapes follow the Anthropic Messages API (content blocks, tool use, usage with cache counters) because
that is the richest API we speak; other backends map onto them. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: list[Block]


class ToolSpec(BaseModel):
    """A tool as the model sees it: a name, what it does, and the JSON schema of its input."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    input_schema: dict[str, Any]


class Usage(BaseModel):
    """Tokens of one call, as the provider counted them (cache counters are separate from ``input_tokens``)."""

    model_config = ConfigDict(extra="forbid")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


class Request(BaseModel):
    """One model call. ``system`` is the long stable prefix, in order (system prompt, role prompt, task,
    knowledge); backends that cache place cache breakpoints after its last two parts and after the last
    message, so every turn re-reads the prefix and the conversation so far from the cache."""

    model_config = ConfigDict(extra="forbid")
    model: str
    system: list[str]
    messages: list[Message]
    tools: list[ToolSpec] = []
    max_tokens: int = Field(default=4096, gt=0)
    temperature: float | None = None


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: list[Block]
    stop_reason: str
    """``end_turn``, ``tool_use``, ``max_tokens``, ``stop_sequence`` or the provider's own value."""
    usage: Usage
    model: str


class LLMError(RuntimeError):
    """The backend gave up on a call (after its retries): the agent's turn ends with this as its record."""


class FatalLLMError(LLMError):
    """A failure no later call can get past (the key is refused, the model does not exist, the request is
    malformed): the run stops at once with this message rather than go on making calls that fail."""


class LLM(Protocol):
    """A language model. ``count_tokens`` is an upper-bound estimate of the request's input tokens, used
    to check the budget before a call is made; ``complete`` makes the call (with the backend's retries)."""

    def count_tokens(self, request: Request) -> int: ...

    def complete(self, request: Request) -> Reply: ...
