"""The agent tool set: every tool takes a pydantic-validated input and returns a ``ToolResult``.

A tool never raises for an expected failure (a bad path, a compile error): that is a result with
``is_error`` set, shown to the model, and the loop continues.

The factory that builds a role's toolbox is ``evoteam.roles.tools.factory.build_toolbox`` (not imported here,
so that ``evoteam.roles.agent_api`` can import the base types without a cycle).
"""

from evoteam.roles.tools.base import TOOL_NAMES, Author, Tool, Toolbox, ToolResult

__all__ = ["TOOL_NAMES", "Author", "Tool", "ToolResult", "Toolbox"]
