"""The agent tool set: every tool takes a pydantic-validated input and returns a ``ToolResult``.

A tool never raises for an expected failure (a bad path, a compile error): that is a result with
``is_error`` set, shown to the model, and the loop continues.
"""

from evoteam.roles.tools.base import Tool, Toolbox, ToolResult

__all__ = ["Tool", "ToolResult", "Toolbox"]
