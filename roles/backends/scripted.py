"""``ScriptedLLM``: a deterministic model for tests; each call takes the next scripted step.

A step is a ``Reply`` or a function of the ``Request`` that returns one (to answer with what the
conversation holds, e.g. echo a tool result). Requests are kept, so tests can check what was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from evoteam.roles.llm import Block, LLMError, Reply, Request, TextBlock, ToolUseBlock, Usage

Step = Reply | Callable[[Request], Reply]


def estimate_tokens(request: Request) -> int:
    """About four characters a token, over everything sent: an estimate, not a tokenizer."""
    size = sum(len(part) for part in request.system)
    size += sum(len(m.model_dump_json()) for m in request.messages)
    size += sum(len(t.model_dump_json()) for t in request.tools)
    return size // 4 + 1


class ScriptedLLM:
    def __init__(self, steps: Iterable[Step], model: str = "scripted") -> None:
        self._steps = list(steps)
        self.model = model
        self.requests: list[Request] = []

    def count_tokens(self, request: Request) -> int:
        return estimate_tokens(request)

    def complete(self, request: Request) -> Reply:
        self.requests.append(request.model_copy(deep=True))
        if not self._steps:
            raise LLMError("the script has no more replies")
        step = self._steps.pop(0)
        reply = step(request) if callable(step) else step
        if reply.usage.total == 0:  # charge something plausible, so budgets move in tests
            reply = reply.model_copy(
                update={"usage": Usage(input_tokens=estimate_tokens(request), output_tokens=_size(reply.content))}
            )
        return reply


def text(message: str) -> Reply:
    """A final answer."""
    return Reply(content=[TextBlock(text=message)], stop_reason="end_turn", usage=Usage(), model="scripted")


def tool_call(name: str, arguments: dict[str, object], call_id: str | None = None, say: str = "") -> Reply:
    """A reply that calls one tool (with an optional line of text before it)."""
    blocks: list[Block] = [TextBlock(text=say)] if say else []
    blocks.append(
        ToolUseBlock(
            id=call_id or f"toolu_{name}_{abs(hash(str(arguments))) % 10**8}", name=name, input=dict(arguments)
        )
    )
    return Reply(content=blocks, stop_reason="tool_use", usage=Usage(), model="scripted")


def _size(blocks: list[Block]) -> int:
    return sum(len(b.model_dump_json()) for b in blocks) // 4 + 1
