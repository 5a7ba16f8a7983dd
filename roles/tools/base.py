"""``Tool`` (one capability with a pydantic input), ``Toolbox`` (the tools one role may use) and ``Author``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from evoteam.roles.llm import ToolSpec

TOOL_NAMES = (
    "view",
    "list",
    "history",
    "diff",
    "write",
    "str_replace",
    "patch",
    "delete",
    "compile",
    "assembly",
    "test",
    "evaluate",
    "profile",
    "sanitize",
    "read_knowledge",
    "write_note",
    "submit_candidate",
)
"""Every tool a role may name (other backends call them by these names), in the order toolboxes list them."""


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str
    """What the model reads."""
    is_error: bool = False
    data: dict[str, Any] | None = None
    """Structured facts for the caller (journal, supervisor); never sent to the model."""


class Author(BaseModel):
    """Who is using a toolbox: written into notes and submissions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: str
    agent_id: str
    round: int = 0


class Tool(Protocol):
    """Read-only members, so a tool may declare them as plain class attributes (``input_model = ViewInput``)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def input_model(self) -> type[BaseModel]: ...

    def run(self, args: Any) -> ToolResult:
        """``args`` is an instance of ``input_model``."""
        ...


class Toolbox:
    """The tools of one agent, by name; ``call`` validates the raw input and turns bad input into an error
    result, so a malformed tool call never ends the agent's turn."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=t.name, description=t.description, input_schema=t.input_model.model_json_schema())
            for t in self._tools.values()
        ]

    def only(self, names: Iterable[str]) -> Toolbox:
        """The subset a role may use; unknown names are an error (a typo in a role file must not pass)."""
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {self.names}")
        return Toolbox(self._tools[n] for n in wanted)

    def wrapped(self, name: str, wrap: Callable[[Tool], Tool]) -> Toolbox:
        """The same tools with the one named ``name`` replaced by ``wrap(it)`` (unchanged without one): how a
        caller adds what it does around a tool, such as journaling what the submit tool made."""
        return Toolbox(wrap(t) if t.name == name else t for t in self._tools.values())

    def call(self, name: str, raw: Any) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(content=f"there is no tool named {name!r}; tools: {', '.join(self.names)}", is_error=True)
        try:
            args = tool.input_model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()[:5]
            )
            return ToolResult(content=f"invalid input for {name}: {problems}", is_error=True)
        return tool.run(args)
