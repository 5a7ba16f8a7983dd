"""The tools a claude-code session gets: the agent's Toolbox as an in-process MCP server, and the policy that
keeps the CLI's own file tools inside the workspace (a permission callback and a PreToolUse hook).

Imports ``claude_agent_sdk`` and ``evoteam.roles``; no process or network I/O of its own.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from claude_agent_sdk import (
    HookContext,
    HookInput,
    HookJSONOutput,
    McpSdkServerConfig,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    SdkMcpTool,
    ToolAnnotations,
    ToolPermissionContext,
    create_sdk_mcp_server,
)

from evoteam.roles.tools import Toolbox

SERVER = "evoteam"
"""The MCP server's name: the model sees each tool as ``mcp__evoteam__<tool>``."""

READ_TOOLS = ("Read", "Glob", "Grep")
WRITE_TOOLS = ("Write", "Edit")
FILE_TOOLS = READ_TOOLS + WRITE_TOOLS
"""The CLI's built-in tools a session may have; Bash, web, notebooks and subagents are never among them."""
NEVER = ("Bash", "BashOutput", "KillShell", "WebFetch", "WebSearch", "Task", "Agent", "NotebookEdit", "Skill")
"""Refused by name as well, in case a CLI version adds one of them back to a restricted tool list."""
REPLACED = {
    "view": READ_TOOLS,
    "list": READ_TOOLS,
    "write": WRITE_TOOLS,
    "str_replace": WRITE_TOOLS,
    "patch": WRITE_TOOLS,
}
"""evoteam's own file tools, which the CLI's built-ins stand in for (a role with ``view`` gets Read, ...)."""

MAX_RESULT_CHARS = 200_000
"""Tool results up to this size stay in the conversation; the CLI would otherwise save a long one to a file
outside the workspace, which the policy then forbids the model to read."""

_PATH_FIELDS = ("file_path", "notebook_path", "path")
_PATTERN_FIELDS = ("pattern", "glob")


def mcp_name(tool: str) -> str:
    return f"mcp__{SERVER}__{tool}"


def builtin_tools(toolbox_names: Iterable[str]) -> list[str]:
    """The CLI file tools that stand in for the role's own file tools, in a stable order."""
    wanted = {t for name in toolbox_names for t in REPLACED.get(name, ())}
    return [t for t in FILE_TOOLS if t in wanted]


def bridged_tools(toolbox: Toolbox) -> list[str]:
    """The toolbox tools served over MCP: all but the file tools that the CLI's built-ins replace."""
    return [name for name in toolbox.names if name not in REPLACED]


def toolbox_server(toolbox: Toolbox, on_failure: Callable[[BaseException], Awaitable[None]]) -> McpSdkServerConfig:
    """An in-process MCP server whose every tool calls ``toolbox.call`` (in a worker thread, one at a time).

    A tool that raises is lost infrastructure, not a result: ``on_failure`` gets the exception (the agent
    stops the session and re-raises it once the session is closed), and the model is told the tool failed."""
    specs = {spec.name: spec for spec in toolbox.specs()}
    lock = anyio.Lock()

    def handler(name: str) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def call(arguments: dict[str, Any]) -> dict[str, Any]:
            async with lock:
                try:
                    result = await anyio.to_thread.run_sync(toolbox.call, name, arguments)
                except Exception as exc:
                    await on_failure(exc)
                    return {"content": [{"type": "text", "text": f"{name} failed: {exc}"}], "is_error": True}
            return {"content": [{"type": "text", "text": result.content or "(no output)"}], "is_error": result.is_error}

        return call

    inline = ToolAnnotations(maxResultSizeChars=MAX_RESULT_CHARS)
    tools: list[SdkMcpTool[Any]] = [
        SdkMcpTool(n, specs[n].description, specs[n].input_schema, handler(n), annotations=inline)
        for n in bridged_tools(toolbox)
    ]
    return create_sdk_mcp_server(SERVER, tools=tools)


class WorkspacePolicy:
    """Decides every tool call of a session: evoteam's MCP tools pass, the file tools pass only for paths
    inside ``root`` (symlinks resolved), anything else is refused. Refusals are kept, for the record."""

    def __init__(self, root: Path, mcp_tools: Iterable[str], file_tools: Iterable[str]) -> None:
        self.root = Path(os.path.realpath(root))
        self.mcp_tools = set(mcp_tools)
        self.file_tools = set(file_tools)
        self.refusals: list[str] = []

    def problem(self, tool: str, tool_input: dict[str, Any]) -> str | None:
        """Why the call is refused, or ``None`` when it may run."""
        if tool in self.mcp_tools:
            return None
        if tool not in self.file_tools:
            return f"{tool} is not available in this session"
        for key in _PATH_FIELDS:
            value = tool_input.get(key)
            if value is not None and (why := self._path_problem(str(value))):
                return why
        for key in _PATTERN_FIELDS if tool != "Grep" else ("glob",):
            value = tool_input.get(key)
            if isinstance(value, str) and (value.startswith(("/", "~")) or ".." in Path(value).parts):
                return f"the pattern {value!r} reaches outside the workspace; use a pattern relative to it"
        return None

    def _path_problem(self, value: str) -> str | None:
        if not value or "\0" in value or value.startswith("~"):
            return f"invalid path {value!r}"
        full = Path(os.path.realpath(self.root / value))  # an absolute value replaces the root
        if full != self.root and self.root not in full.parents:
            return f"{value!r} is outside the workspace ({self.root}); only files inside it may be used"
        return None

    def _refuse(self, tool: str, why: str) -> str:
        self.refusals.append(f"{tool}: {why}")
        return why

    async def can_use_tool(self, tool: str, tool_input: dict[str, Any], _: ToolPermissionContext) -> PermissionResult:
        """The CLI's permission prompt, answered: the calls it would ask a person about."""
        why = self.problem(tool, tool_input)
        if why is None:
            return PermissionResultAllow()
        return PermissionResultDeny(message=self._refuse(tool, why))

    async def pre_tool_use(self, data: HookInput, _: str | None, __: HookContext) -> HookJSONOutput:
        """Every call, also those the CLI allows without asking (reads inside its working directory):
        refuses what ``problem`` refuses, and otherwise leaves the decision to the permission flow."""
        tool = str(data.get("tool_name", ""))
        tool_input = data.get("tool_input")
        why = self.problem(tool, tool_input if isinstance(tool_input, dict) else {})
        if why is None:
            return {}
        reason = self._refuse(tool, why)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
