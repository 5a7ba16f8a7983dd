"""``ClaudeCodeAgent``: one Claude Code session (through claude-agent-sdk and the CLI it bundles) as an evoteam
``Agent`` — the single-agent baseline — confined to its workspace, capped by the shared token budget.

The session runs in the workspace with the CLI's file tools, each call checked against the workspace root, and
its shell, each command run inside the candidates' bubblewrap sandbox (no shell where none isolates; no web, no
subagents), plus the agent's Toolbox served in-process over MCP, so submissions land
where they land for every other backend. Usage streamed by the CLI is charged to the budget call by call; the
session is interrupted when the next token would not fit. CLI failures (crashed, timed out, an API error a
later call could get past) come back as ``stop="llm_error"`` reports, with secrets scrubbed; a missing CLI and
an API error no retry can fix (401, 403, 404, a malformed 400: ``retry.is_fatal``) raise ``FatalLLMError``,
which stops the run. Imports ``claude_agent_sdk`` and
``evoteam.roles``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    CLINotFoundError,
    HookMatcher,
    ProcessError,
    ResultMessage,
    StreamEvent,
    TextBlock,
)
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evoteam.gpu_bench.api import current_sandbox
from evoteam.roles.agent_api import AgentContext, AgentReport, StopReason
from evoteam.roles.backends.anthropic_api import TOO_LONG
from evoteam.roles.backends.claude_code_prompt import session_prompt
from evoteam.roles.backends.claude_code_tools import (
    NEVER,
    SHELL,
    Confine,
    WorkspacePolicy,
    bridged_tools,
    builtin_tools,
    mcp_name,
    sandbox_shell,
    toolbox_server,
)
from evoteam.roles.backends.claude_code_usage import CallMeter, remainder, result_usage
from evoteam.roles.backends.retry import is_fatal
from evoteam.roles.budget import BudgetExhausted
from evoteam.roles.llm import FatalLLMError, Usage
from evoteam.roles.prompt import TaskPrompt

log = logging.getLogger(__name__)

QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
}
"""Set unless ``ClaudeCodeSettings.env`` says otherwise: no telemetry, update checks or other side traffic, and
no memory carried between sessions outside evoteam's knowledge store."""
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_SECRET_SHAPE = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")


class ClaudeCodeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    """Used when the role names no model; ``None``: the CLI's default model."""
    max_turns: int = Field(default=30, gt=0)
    """Used when the assignment sets no ``max_turns`` of its own."""
    cli_path: Path | None = None
    """``None``: the CLI bundled with claude-agent-sdk (else ``claude`` on PATH)."""
    base_url: str | None = None
    """``ANTHROPIC_BASE_URL`` for the CLI (an Anthropic-compatible server); ``None``: as inherited."""
    api_key: SecretStr | None = None
    """``ANTHROPIC_API_KEY`` for the CLI; ``None``: as inherited. Never shown in repr, JSON, logs or errors."""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Passed to the CLI over the inherited environment (``CLAUDE_CODE_MAX_RETRIES``, ``API_TIMEOUT_MS``, ...);
    wins over the defaults here. Hidden from repr in case it holds a secret all the same."""
    config_dir: Path | None = None
    """``CLAUDE_CONFIG_DIR`` for the CLI (sessions, caches); ``None``: the CLI's own (``~/.claude``)."""
    system_prompt: str = ""
    """Appended to Claude Code's own system prompt."""
    timeout_s: float = Field(default=4 * 3600.0, gt=0)
    """The whole session, wall clock; past it the session ends as an ``llm_error``."""
    tool_timeout_s: float = Field(default=3600.0, gt=0)
    """How long the CLI waits for one evoteam tool call (an evaluation may take minutes)."""
    shell: bool = True
    """Give the session the CLI's Bash, each command confined in the candidates' sandbox (the workspace its
    only writable folder, no network); where no sandbox isolates, the session has no shell whatever this says."""


class SessionRecord(BaseModel):
    """What the CLI said about the last session beyond the report: its id, cost, refusals."""

    model_config = ConfigDict(extra="forbid")
    session_id: str | None = None
    model: str | None = None
    usd: float = 0.0
    usd_source: Literal["cli", "pricing"] = "pricing"
    result_subtype: str | None = None
    terminal_reason: str | None = None
    model_calls: int = 0
    refusals: list[str] = []
    """Tool calls that the workspace policy refused, as ``tool: reason``."""


class _Session:
    """The state of one running session: what was charged, why it stopped, what the CLI printed."""

    def __init__(self, context: AgentContext, model: str | None) -> None:
        self.context = context
        self.model = model
        self.meter = CallMeter()
        self.charged = Usage()
        self.first_submission = len(context.submissions)
        self.stopping: Literal["budget", "tool_failure", "timeout"] | None = None
        """Why the session was interrupted, when it was."""
        self.failures: list[BaseException] = []
        self.client: ClaudeSDKClient | None = None
        self.result: ResultMessage | None = None
        self.last_text = ""
        self.stderr: deque[str] = deque(maxlen=40)

    def charge(self, usage: Usage | None) -> None:
        if usage is None or usage.total == 0:
            return
        a = self.context.assignment
        self.context.budget.charge(usage, a.role.name, a.agent_id, self.meter.model or self.model or "")
        self.charged = self.charged + usage

    def should_stop(self) -> bool:
        """The call in flight has used up what the budget has left: no further token fits."""
        return self.meter.in_flight.total >= self.context.budget.remaining

    async def interrupt(self, why: Literal["budget", "tool_failure", "timeout"]) -> None:
        """Ends the session's turn now (once); the CLI still sends its result, with the usage so far."""
        if self.stopping is not None or self.client is None:
            return
        self.stopping = why
        with anyio.move_on_after(10), contextlib.suppress(ClaudeSDKError):
            await self.client.interrupt()

    async def tool_failed(self, exc: BaseException) -> None:
        self.failures.append(exc)
        await self.interrupt("tool_failure")


class ClaudeCodeAgent:
    def __init__(self, settings: ClaudeCodeSettings | None = None, task: TaskPrompt | None = None) -> None:
        self.settings = settings or ClaudeCodeSettings()
        self.task = task
        self.last_session: SessionRecord | None = None

    def run(self, context: AgentContext) -> AgentReport:
        """Runs one session to its end (blocking; call it from a thread, not from inside an event loop)."""
        a = context.assignment
        file_tools = builtin_tools(context.toolbox.names)
        mcp_tools = [mcp_name(n) for n in bridged_tools(context.toolbox)]
        prompt = session_prompt(a, file_tools + mcp_tools, self.task or context.task)
        try:
            context.budget.check(len(prompt) // 4 + 1, f"{a.role.name}/{a.agent_id}")
        except BudgetExhausted as exc:
            return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="budget", error=str(exc))
        session = _Session(context, a.role.model or self.settings.model)
        confine = self._shell(context)
        if confine is not None:
            file_tools.append(SHELL)
        policy = WorkspacePolicy(context.workspace.root, mcp_tools, file_tools, confine)
        error: str | None = None
        try:
            anyio.run(self._converse, session, policy, prompt)
        except Exception as exc:
            error = cli_error(exc)
            if error is None:
                raise
        finally:
            self._settle(session)
        if session.failures:
            raise session.failures[0]
        report = self._report(session, policy, error)
        fatal = fatal_error(session.result, error)
        if fatal is not None:  # what was submitted is journaled already; the run stops with this message
            raise FatalLLMError(scrub(self.settings, fatal))
        return report

    def _shell(self, context: AgentContext) -> Confine | None:
        """The confinement of the session's shell commands, when it gets a shell: the setting is on, the role
        may edit files, and a sandbox isolates here."""
        if not self.settings.shell or "write" not in context.toolbox.names:
            return None
        env = {**os.environ, **self.settings.env}
        return sandbox_shell(current_sandbox(), context.workspace.root, env)

    async def _converse(self, s: _Session, policy: WorkspacePolicy, prompt: str) -> None:
        options = self._options(s, policy)
        with anyio.fail_after(self.settings.timeout_s + 60):  # a last resort, should the CLI not stop
            async with ClaudeSDKClient(options) as client:
                s.client = client
                with anyio.move_on_after(self.settings.timeout_s) as limit:
                    await client.query(prompt)
                    await self._follow(s, client)
                if limit.cancelled_caught:
                    await s.interrupt("timeout")
                    with anyio.move_on_after(10):  # the result after the interrupt: the usage so far
                        await self._follow(s, client)

    async def _follow(self, s: _Session, client: ClaudeSDKClient) -> None:
        """Reads the session to its result: charges each finished model call, stops at the budget's end."""
        async for message in client.receive_response():
            if isinstance(message, StreamEvent) and message.parent_tool_use_id is None:
                s.charge(s.meter.feed(message.event))
                if s.should_stop():
                    await s.interrupt("budget")
            elif isinstance(message, AssistantMessage):
                texts = [b.text for b in message.content if isinstance(b, TextBlock)]
                s.last_text = "\n".join(texts) or s.last_text
            elif isinstance(message, ResultMessage):
                s.result = message

    def _options(self, s: _Session, policy: WorkspacePolicy) -> ClaudeAgentOptions:
        ctx = s.context
        turns = ctx.assignment.max_turns if "max_turns" in ctx.assignment.model_fields_set else self.settings.max_turns
        env = {**QUIET_ENV, "MCP_TOOL_TIMEOUT": str(int(self.settings.tool_timeout_s * 1000)), **self.settings.env}
        if self.settings.config_dir is not None:
            env["CLAUDE_CONFIG_DIR"] = str(self.settings.config_dir)
        if self.settings.base_url is not None:
            env["ANTHROPIC_BASE_URL"] = self.settings.base_url
        if self.settings.api_key is not None:
            env["ANTHROPIC_API_KEY"] = self.settings.api_key.get_secret_value()
        return ClaudeAgentOptions(
            cwd=ctx.workspace.root,
            model=s.model,
            max_turns=turns,
            tools=sorted(policy.file_tools),
            disallowed_tools=list(NEVER),
            mcp_servers={"evoteam": toolbox_server(ctx.toolbox, s.tool_failed)},
            strict_mcp_config=True,
            setting_sources=[],
            permission_mode="default",
            can_use_tool=policy.can_use_tool,
            hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[policy.pre_tool_use], on_failure="block")]},
            system_prompt={"type": "preset", "preset": "claude_code", "append": self.settings.system_prompt},
            include_partial_messages=True,
            verbatim_prompts=True,
            cli_path=self.settings.cli_path,
            env=env,
            stderr=lambda line: self._stderr(s, line),
        )

    def _stderr(self, s: _Session, line: str) -> None:
        line = scrub(self.settings, line)
        s.stderr.append(line)
        log.debug("claude-code stderr: %s", line)

    def _settle(self, s: _Session) -> None:
        """Charges a call cut short, then what the CLI's final total holds beyond the calls seen in the
        stream (side calls of the CLI), so the budget ends up charged with what the CLI reported."""
        s.charge(s.meter.close())
        if s.result is not None:
            s.charge(remainder(result_usage(s.result.usage, s.result.model_usage), s.charged))

    def _report(self, s: _Session, policy: WorkspacePolicy, error: str | None) -> AgentReport:
        a = s.context.assignment
        stop, why = self._stop(s, error)
        if stop == "llm_error" and s.stderr:
            why = f"{why}\nCLI stderr (last lines):\n" + "\n".join(s.stderr)
        r = s.result
        model = s.meter.model or s.model or ""
        cli_usd = r.total_cost_usd if r is not None else None
        self.last_session = SessionRecord(
            session_id=r.session_id if r is not None else None,
            model=model or None,
            usd=cli_usd if cli_usd is not None else s.context.budget.pricing.usd(model, s.charged),
            usd_source="cli" if cli_usd is not None else "pricing",
            result_subtype=r.subtype if r is not None else None,
            terminal_reason=r.terminal_reason if r is not None else None,
            model_calls=s.meter.calls,
            refusals=list(policy.refusals),
        )
        return AgentReport(
            role=a.role.name,
            agent_id=a.agent_id,
            submissions=s.context.submissions[s.first_submission :],
            usage=s.charged,
            turns=r.num_turns if r is not None else s.meter.calls,
            stop=stop,
            error=scrub(self.settings, why) if why else None,
            final_text=(r.result if r is not None and r.result and not r.is_error else None) or s.last_text,
        )

    def _stop(self, s: _Session, error: str | None) -> tuple[StopReason, str | None]:
        r = s.result
        if error is not None:
            return "llm_error", error
        if s.stopping == "timeout":
            return "llm_error", f"the session ran past its {self.settings.timeout_s:g} s limit"
        if s.stopping == "budget":
            return "budget", f"stopped: the token budget has {s.context.budget.remaining} tokens left"
        if r is None:
            return "llm_error", "the Claude Code CLI ended the session without a result"
        if r.subtype == "error_max_turns":
            return "max_turns", None
        if r.subtype == "error_max_budget_usd":
            return "budget", "the CLI's dollar budget is spent"
        if r.is_error:
            status = f" (HTTP {r.api_error_status})" if r.api_error_status else ""
            detail = r.result or "; ".join(r.errors or []) or r.subtype
            return "llm_error", f"the Claude Code session failed{status}: {detail}"
        return "end_turn", None


def scrub(settings: ClaudeCodeSettings, text: str) -> str:
    """``text`` without the API key, nor the values of secret-looking variables of the CLI's environment."""
    env: Mapping[str, str] = {**os.environ, **settings.env}
    secrets = [value for name, value in env.items() if _SECRET_NAME.search(name)]
    if settings.api_key is not None:
        secrets.append(settings.api_key.get_secret_value())
    for value in sorted(secrets, key=len, reverse=True):
        if len(value) >= 6:
            text = text.replace(value, "***")
    return _SECRET_SHAPE.sub("***", text)


def fatal_error(result: ResultMessage | None, error: str | None) -> str | None:
    """Why no later session can succeed (the key is refused, the model does not exist, a malformed request,
    no CLI to run), or None: the same rule as the API backends (``retry.is_fatal``)."""
    if error is not None and error.startswith("the Claude Code CLI was not found"):
        return error
    if result is None or not result.is_error or not result.api_error_status:
        return None
    detail = result.result or "; ".join(result.errors or []) or result.subtype
    if not is_fatal(result.api_error_status, detail, TOO_LONG):
        return None
    return f"the Claude Code session failed (HTTP {result.api_error_status}): {detail}"


def cli_error(exc: BaseException) -> str | None:
    """What went wrong with the CLI, for the report; ``None`` when ``exc`` is no CLI failure (re-raise it)."""
    if isinstance(exc, BaseExceptionGroup):
        messages = [cli_error(e) for e in exc.exceptions]
        return "; ".join(m for m in messages if m) if all(messages) else None
    if isinstance(exc, TimeoutError):
        return "the Claude Code CLI did not stop after the session's time limit"
    if isinstance(exc, CLINotFoundError):
        return f"the Claude Code CLI was not found ({exc}); install claude-agent-sdk or set cli_path"
    if isinstance(exc, ProcessError):
        return f"the Claude Code CLI failed (exit code {exc.exit_code})"
    if isinstance(exc, ClaudeSDKError | OSError):
        return f"the Claude Code CLI could not run: {exc}"
    return None
