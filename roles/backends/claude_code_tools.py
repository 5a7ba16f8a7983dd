"""The tools a claude-code session gets: the agent's Toolbox as an in-process MCP server, and the policy that
keeps the CLI's own file tools inside the workspace (a permission callback and a PreToolUse hook), and its
shell inside the sandbox candidates run in: every Bash command is rewritten to run under bubblewrap (read-only
file system but the workspace, no network, secrets hidden, a cleared environment), or refused where there is
no such sandbox.

Imports ``claude_agent_sdk`` and ``evoteam.roles``; no process or network I/O of its own.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable, Iterable, Mapping
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

from evoteam.gpu_bench.api import Sandbox
from evoteam.roles.tools import Toolbox

SERVER = "evoteam"
"""The MCP server's name: the model sees each tool as ``mcp__evoteam__<tool>``."""

READ_TOOLS = ("Read", "Glob", "Grep")
WRITE_TOOLS = ("Write", "Edit")
FILE_TOOLS = READ_TOOLS + WRITE_TOOLS
"""The CLI's built-in file tools a session may have; web, notebooks and subagents are never among them."""
SHELL = "Bash"
"""The CLI's shell: given only with a sandbox (``Confine``), every command run inside it."""
NEVER = ("BashOutput", "KillShell", "WebFetch", "WebSearch", "Task", "Agent", "NotebookEdit", "Skill")
"""Refused by name as well, in case a CLI version adds one of them back to a restricted tool list."""
CONFINED = "# evoteam: confined\n"
"""The first line of a rewritten command (a command is never confined twice)."""

Confine = Callable[[str], str]
"""A shell command → the command that runs it inside the sandbox."""
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

    def __init__(
        self, root: Path, mcp_tools: Iterable[str], file_tools: Iterable[str], confine: Confine | None = None
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.mcp_tools = set(mcp_tools)
        self.file_tools = set(file_tools)
        self.confine = confine
        """Rewrites a Bash command to run in the sandbox; None: the session has no shell."""
        self.refusals: list[str] = []
        self.commands: list[str] = []
        """The shell commands run (as the model wrote them)."""

    def problem(self, tool: str, tool_input: dict[str, Any]) -> str | None:
        """Why the call is refused, or ``None`` when it may run."""
        if tool in self.mcp_tools:
            return None
        if tool == SHELL:
            if self.confine is None:
                return "Bash is not available in this session (no sandbox to run commands in)"
            if tool_input.get("run_in_background"):
                return "commands cannot run in the background here; run them in the foreground"
            return None if isinstance(tool_input.get("command"), str) else "Bash needs a command"
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

    def confined(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any] | None:
        """The input with its command rewritten to run in the sandbox, for a Bash call; None for other tools."""
        if tool != SHELL or self.confine is None:
            return None
        command = str(tool_input["command"])
        if command.startswith(CONFINED):
            return dict(tool_input)
        self.commands.append(command)
        return {**tool_input, "command": CONFINED + self.confine(command)}

    async def can_use_tool(self, tool: str, tool_input: dict[str, Any], _: ToolPermissionContext) -> PermissionResult:
        """The CLI's permission prompt, answered: the calls it would ask a person about."""
        why = self.problem(tool, tool_input)
        if why is None:
            return PermissionResultAllow(updated_input=self.confined(tool, tool_input))
        return PermissionResultDeny(message=self._refuse(tool, why))

    async def pre_tool_use(self, data: HookInput, _: str | None, __: HookContext) -> HookJSONOutput:
        """Every call, also those the CLI allows without asking (reads inside its working directory):
        refuses what ``problem`` refuses, and otherwise leaves the decision to the permission flow."""
        tool = str(data.get("tool_name", ""))
        tool_input = data.get("tool_input")
        given = tool_input if isinstance(tool_input, dict) else {}
        why = self.problem(tool, given)
        if why is None:
            rewritten = self.confined(tool, given)
            if rewritten is None:
                return {}
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": "runs inside evoteam's sandbox",
                    "updatedInput": rewritten,
                }
            }
        reason = self._refuse(tool, why)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }


def sandbox_shell(sandbox: Sandbox, workspace: Path, env: Mapping[str, str]) -> Confine | None:
    """How a session's shell commands run in ``sandbox``: ``env -i`` with the sandbox's cleared environment,
    then bubblewrap (the workspace writable, its own temporary folder inside it), then ``bash -c`` in the
    workspace; None where the sandbox does not isolate (no shell then)."""
    if not sandbox.isolated:
        return None
    root = Path(os.path.realpath(workspace))

    def confine(command: str) -> str:
        argv, cleared = sandbox.wrap(
            ["bash", "-c", f"cd {shlex.quote(str(root))} && {command}"],
            writable=[root],
            tmpdir=root.parent / f".{root.name}-tmp",
            env=env,
        )
        return shlex.join(["env", "-i", *(f"{k}={v}" for k, v in sorted(cleared.items())), *argv])

    return confine
