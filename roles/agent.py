"""``LoopAgent``: the tool loop over any ``LLM`` — ask the model, run the tools it calls, answer, repeat.

It stops on a final answer (``end_turn``), ``max_turns``, an ``LLMError``, an exhausted budget (checked before
every call, charged after) or a cancel request, and returns an ``AgentReport``; a ``FatalLLMError`` (the key
refused, no such model) is raised to the caller instead, since the whole run must stop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evoteam.roles.agent_api import AgentContext, AgentReport, StopReason
from evoteam.roles.budget import BudgetExhausted
from evoteam.roles.llm import (
    LLM,
    Block,
    FatalLLMError,
    LLMError,
    Message,
    Request,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from evoteam.roles.prompt import package_prompt, render


class AgentEvent(BaseModel):
    """One thing that happened in a loop, for the run's journal: a model call (``turn``), a tool call
    (``tool``) or the end (``stop``)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["turn", "tool", "stop"]
    role: str
    agent_id: str
    turn: int
    usage: Usage | None = None
    """turn: this call's tokens; stop: the whole loop's."""
    stop_reason: str | None = None
    """turn: the provider's stop reason."""
    tool: str | None = None
    input: str = ""
    """tool: the input, as short JSON."""
    is_error: bool = False
    result: str = ""
    """tool: the first line of the result."""
    data: dict[str, Any] | None = None
    """tool: the result's structured facts."""
    stop: StopReason | None = None
    error: str | None = None


EventSink = Callable[[AgentEvent], None]


class LoopAgent:
    """A tool-loop agent. ``model`` is used unless the role names its own; ``should_stop`` is polled before
    each call (a cancel request ends the loop with ``stop="cancelled"``)."""

    def __init__(
        self,
        llm: LLM,
        model: str,
        max_tokens: int = 4096,
        temperature: float | None = None,
        on_event: EventSink | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.llm = llm
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.on_event = on_event
        self.should_stop = should_stop

    def system(self, context: AgentContext) -> list[str]:
        """The stable prefix, in order: system prompt, role prompt, task description, knowledge summary."""
        if context.task is None:
            raise ValueError("LoopAgent needs context.task, the kernel's prompt variables (roles.prompt.task_prompt)")
        role = context.assignment.role
        values = context.task.variables(role.name, context.toolbox.names, context.assignment.brief)
        return [
            render(package_prompt("system"), values, "roles/prompts/system.md"),
            render(role.mission, values, f"mission of role {role.name!r}"),
            render(package_prompt("task"), values, "roles/prompts/task.md"),
            render(package_prompt("knowledge"), values, "roles/prompts/knowledge.md"),
        ]

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        model = a.role.model or self.model
        system = self.system(context)
        tools = context.toolbox.specs()
        messages = [Message(role="user", content=[TextBlock(text=first_message(context, self.max_tokens))])]
        first_submission = len(context.submissions)
        usage = Usage()
        turns = 0
        last_text = ""

        def finish(stop: StopReason, error: str | None = None) -> AgentReport:
            self._emit(context, "stop", turns, usage=usage, stop=stop, error=error)
            return AgentReport(
                role=a.role.name,
                agent_id=a.agent_id,
                submissions=[s for s in context.submissions[first_submission:] if s.agent_id == a.agent_id],
                usage=usage,
                turns=turns,
                stop=stop,
                error=error,
                final_text=last_text,
            )

        for turn in range(1, a.max_turns + 1):
            if self.should_stop is not None and self.should_stop():
                return finish("cancelled")
            request = Request(
                model=model,
                system=system,
                messages=messages,
                tools=tools,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
            try:
                context.budget.check(self.llm.count_tokens(request) + self.max_tokens, f"{a.role.name}/{a.agent_id}")
                reply = self.llm.complete(request)
            except BudgetExhausted as exc:
                return finish("budget", str(exc))
            except FatalLLMError:
                raise  # the run stops (the supervisor records it): no turn of any agent can succeed
            except LLMError as exc:
                return finish("llm_error", str(exc) or type(exc).__name__)
            context.budget.charge(reply.usage, a.role.name, a.agent_id, model)
            usage = usage + reply.usage
            turns = turn
            last_text = _text(reply.content) or last_text
            self._emit(context, "turn", turn, usage=reply.usage, stop_reason=reply.stop_reason)
            if reply.content:
                messages.append(Message(role="assistant", content=reply.content))
            calls = [b for b in reply.content if isinstance(b, ToolUseBlock)]
            if not calls:
                return finish("end_turn")
            results: list[Block] = [self._call(context, call, turn) for call in calls]
            messages.append(Message(role="user", content=results))
        return finish("max_turns")

    def _call(self, context: AgentContext, call: ToolUseBlock, turn: int) -> ToolResultBlock:
        result = context.toolbox.call(call.name, call.input)
        self._emit(
            context,
            "tool",
            turn,
            tool=call.name,
            input=_short(json.dumps(call.input, default=str)),
            is_error=result.is_error,
            result=_short(result.content.strip().splitlines()[0] if result.content.strip() else ""),
            data=_compact(result.data),
        )
        return ToolResultBlock(tool_use_id=call.id, content=result.content or "(no output)", is_error=result.is_error)

    def _emit(self, context: AgentContext, kind: Literal["turn", "tool", "stop"], turn: int, **fields: Any) -> None:
        if self.on_event is not None:
            a = context.assignment
            self.on_event(AgentEvent(kind=kind, role=a.role.name, agent_id=a.agent_id, turn=turn, **fields))


def _brief(round: int, rounds: int, brief: str) -> str:
    head = f"Round {round}."
    if rounds:
        left = rounds - round
        head = f"Round {round} of {rounds} ({'the last one' if left <= 0 else f'{left} more after this one'})."
    if brief.strip():
        return f"{head} Your brief from the supervisor:\n\n{brief.strip()}"
    return f"{head} There is no particular brief this round: work on your mission."


def first_message(context: AgentContext, max_tokens: int) -> str:
    """The conversation's first message: the round (of how many) and the supervisor's brief, then the agent's
    limits."""
    a = context.assignment
    return f"{_brief(a.round, a.rounds, a.brief)}\n\n{limits(context, max_tokens)}"


def limits(context: AgentContext, max_tokens: int) -> str:
    """What the agent may spend this round, said at its start: turns, tokens (its role's share), evaluations
    (when the run has an evaluation budget) and the length of one reply."""
    parts = [
        f"at most {context.assignment.max_turns} turns",
        f"{context.budget.remaining:,} tokens (your role's share of this round; every call's input counts)",
    ]
    if context.evaluations is not None:
        parts.append(f"{context.evaluations} calls of evaluate")
    return (
        f"Your limits this round: {'; '.join(parts)}. One reply holds at most {max_tokens:,} tokens: change a long "
        "file with patch or str_replace rather than rewriting it whole."
    )


def _text(blocks: list[Block]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()


def _compact(data: dict[str, Any] | None, limit: int = 2000) -> dict[str, Any] | None:
    """The result's facts for the journal, with long strings (a viewed file's text) replaced by their size."""
    if data is None:
        return None
    return {k: f"<{len(v)} characters>" if isinstance(v, str) and len(v) > limit else v for k, v in data.items()}


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
