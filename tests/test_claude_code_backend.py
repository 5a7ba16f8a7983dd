"""The claude-code backend: the bundled CLI against the fake Messages server on loopback (evoteam tools over
MCP, budget charging and caps, the workspace fence, CLI failures), and its pure parts on their own."""

from __future__ import annotations

import shlex
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed (pip install -e .[claude-code])")

import claude_agent_sdk
from pydantic import BaseModel

from evoteam.gpu_bench.sandbox import current as current_sandbox
from evoteam.gpu_bench.sandbox.policy import Unsandboxed
from evoteam.gpu_bench.schema import Binding, BuildSpec, Language, Solution, SourceFile
from evoteam.roles.agent_api import AgentContext, AgentReport, Assignment, Submission
from evoteam.roles.backends.claude_code import ClaudeCodeAgent, ClaudeCodeSettings, scrub
from evoteam.roles.backends.claude_code_prompt import session_prompt
from evoteam.roles.backends.claude_code_tools import CONFINED, WorkspacePolicy, builtin_tools, mcp_name, sandbox_shell
from evoteam.roles.backends.claude_code_usage import CallMeter, remainder, result_usage
from evoteam.roles.backends.fake_messages_script import FakeReply, FakeText, FakeToolUse, ScriptItem
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_prompt_cache import CacheAccount, PromptCacheEmulator
from evoteam.roles.budget import TokenBudget
from evoteam.roles.llm import FatalLLMError, Usage
from evoteam.roles.prompt import TaskPrompt
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools import Toolbox, ToolResult
from evoteam.roles.workspace import Workspace

KEY = "sk-fake-9f8e7d6c5b4a"
BUNDLED = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
needs_cli = pytest.mark.skipif(not BUNDLED.is_file(), reason=f"the bundled Claude Code CLI is missing ({BUNDLED})")
KERNEL = 'extern "C" void scale_add(const float* x, float* y, int n) { for (int i = 0; i < n; ++i) y[i] += x[i]; }\n'
ROLE = RoleSpec(
    name="Optimizer",
    mission="Make $kernel faster. Tools: $tools.",
    tools=["view", "write", "write_note", "submit_candidate"],
)


# --- fake evoteam tools --------------------------------------------------------------------------------------


class NoteInput(BaseModel):
    text: str


class SubmitInput(BaseModel):
    path: str
    rationale: str


@dataclass
class FileTool:
    """Stands for evoteam's own file tool of that name, which the CLI's built-in file tools replace."""

    name: str
    description: str = "never called: the CLI's own file tools stand in for it"
    input_model: type[BaseModel] = NoteInput

    def run(self, args: NoteInput) -> ToolResult:
        raise AssertionError(f"{self.name} was called, but the CLI's own file tools replace it")


@dataclass
class NoteTool:
    notes: list[str] = field(default_factory=list)
    name: str = "write_note"
    description: str = "Record a note for the team."
    input_model: type[BaseModel] = NoteInput

    def run(self, args: NoteInput) -> ToolResult:
        self.notes.append(args.text)
        return ToolResult(content=f"noted ({len(self.notes)})")


@dataclass
class SubmitTool:
    workspace: Workspace
    submissions: list[Submission]
    name: str = "submit_candidate"
    description: str = "Submit a workspace file as this round's candidate."
    input_model: type[BaseModel] = SubmitInput

    def run(self, args: SubmitInput) -> ToolResult:
        path = self.workspace.resolve(args.path)
        spec = BuildSpec(
            language=Language.CPP, target_hardware=["cpu"], entry_point=f"{args.path}::scale_add", binding=Binding.C
        )
        source = SourceFile(path=args.path, content=path.read_text())
        solution = Solution(
            name="candidate", definition="scale_add_f32", author="Optimizer", spec=spec, sources=[source]
        )
        self.submissions.append(
            Submission(solution=solution, rationale=args.rationale, role="Optimizer", agent_id="a1")
        )
        return ToolResult(content="submitted")


# --- the fake server, recording what it reported ------------------------------------------------------------


class RecordingCache(PromptCacheEmulator):
    def __init__(self) -> None:
        super().__init__()
        self.accounts: list[CacheAccount] = []

    def account(self, body: dict[str, Any]) -> CacheAccount:
        result = super().account(body)
        self.accounts.append(result)
        return result


class Script:
    """Answers each model call by how many assistant turns the conversation holds (a side call of the CLI,
    without the session's tools, gets a short text), and keeps every reply it served."""

    def __init__(self, steps: list[ScriptItem]) -> None:
        self.steps = steps
        self.served: list[ScriptItem] = []

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        side_call = not body.get("tools")
        item = say("ok") if side_call or turns >= len(self.steps) else self.steps[turns]
        self.served.append(item)
        return item


def say(text: str, output_tokens: int = 7) -> FakeReply:
    return FakeReply(content=[FakeText(text=text)], output_tokens=output_tokens)


def call(tool: str, output_tokens: int = 11, **arguments: Any) -> FakeReply:
    return FakeReply(
        content=[FakeToolUse(name=tool, input=arguments)], stop_reason="tool_use", output_tokens=output_tokens
    )


def reported(cache: RecordingCache, script: Script) -> Usage:
    """The sum of the usage the fake server put in its replies."""
    total = Usage(output_tokens=sum(i.output_tokens or 0 for i in script.served if isinstance(i, FakeReply)))
    for a in cache.accounts:
        total = total + Usage(
            input_tokens=a.input_tokens,
            cache_creation_input_tokens=a.cache_creation_input_tokens,
            cache_read_input_tokens=a.cache_read_input_tokens,
        )
    return total


@dataclass
class Rig:
    tmp: Path
    server: FakeMessagesServer
    cache: RecordingCache
    script: Script
    workspace: Workspace
    notes: NoteTool
    submissions: list[Submission]

    def settings(self, **changes: Any) -> ClaudeCodeSettings:
        values: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "base_url": self.server.base_url,
            "api_key": KEY,
            "env": {"CLAUDE_CODE_MAX_RETRIES": "0", "API_TIMEOUT_MS": "30000"},
            "config_dir": self.tmp / "cli-config",
            "timeout_s": 90.0,
        }
        return ClaudeCodeSettings(**{**values, **changes})

    def context(self, budget: TokenBudget, **assignment: Any) -> AgentContext:
        toolbox = Toolbox(
            [FileTool("view"), FileTool("write"), self.notes, SubmitTool(self.workspace, self.submissions)]
        )
        a = Assignment(role=ROLE, agent_id="a1", kernel="scale_add", brief="Vectorize the loop.", **assignment)
        return AgentContext(a, self.workspace, toolbox, budget, self.submissions)

    def run(
        self,
        steps: list[ScriptItem],
        budget: TokenBudget | None = None,
        settings: ClaudeCodeSettings | None = None,
        **assignment: Any,
    ) -> AgentReport:
        self.script.steps = steps
        agent = ClaudeCodeAgent(settings or self.settings())
        return agent.run(self.context(budget or TokenBudget(10_000_000), **assignment))

    def bodies(self) -> list[dict[str, Any]]:
        return [b for b in self.server.message_bodies() if b.get("tools")]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP-SECRET-CONTENT\n")
    cache, script = RecordingCache(), Script([])
    with FakeMessagesServer(script, api_key=KEY, cache=cache) as server:
        yield Rig(tmp_path, server, cache, script, Workspace(root), NoteTool(), [])


def tool_results(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool results in a request, by tool-use id."""
    return {
        b["tool_use_id"]: b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


# --- sessions through the CLI --------------------------------------------------------------------------------


@pytest.mark.integration
@needs_cli
def test_a_session_uses_evoteam_tools_and_is_charged_what_the_server_reported(rig: Rig) -> None:
    budget = TokenBudget(10_000_000)
    report = rig.run(
        [
            call("Write", file_path="kernel.cpp", content=KERNEL),
            call(mcp_name("write_note"), text="the loop vectorizes with -O3"),
            call(mcp_name("submit_candidate"), path="kernel.cpp", rationale="a plain loop"),
            say("Submitted the kernel.", output_tokens=5),
        ],
        budget,
        rig.settings(system_prompt="Work in the evoteam workspace only."),
    )
    assert report.stop == "end_turn", report.error
    assert report.error is None and report.final_text == "Submitted the kernel."
    assert (rig.workspace.root / "kernel.cpp").read_text() == KERNEL
    assert rig.notes.notes == ["the loop vectorizes with -O3"]
    assert [s.rationale for s in rig.submissions] == ["a plain loop"]
    assert report.submissions == rig.submissions
    assert rig.submissions[0].solution.sources[0].content == KERNEL

    bodies = rig.bodies()
    assert len(bodies) == 4
    first = bodies[0]
    assert first["model"] == "claude-sonnet-4-5"
    assert "Work in the evoteam workspace only." in str(first["system"])
    names = {t["name"] for t in first["tools"]}
    shell = {"Bash"} if current_sandbox().isolated else set()  # a role that edits gets the confined shell
    assert (
        names == {"Read", "Write", "Edit", "Glob", "Grep", mcp_name("write_note"), mcp_name("submit_candidate")} | shell
    )
    prompt = str(first["messages"][0]["content"])
    assert "Make scale_add faster." in prompt and "Vectorize the loop." in prompt
    results = tool_results(bodies[-1])
    assert [r.get("is_error", False) for r in results.values()] == [False, False, False]

    expected = reported(rig.cache, rig.script)
    assert expected.cache_creation_input_tokens > 0 and expected.cache_read_input_tokens > 0  # the CLI caches
    assert report.usage == expected
    assert budget.spent == expected.total
    [account] = budget.accounts()
    assert (account.role, account.agent, account.usage) == ("Optimizer", "a1", expected)
    assert account.calls >= 4 and account.usd > 0
    assert report.turns >= 4


@pytest.mark.integration
def test_an_exhausted_budget_starts_no_session(rig: Rig) -> None:
    budget = TokenBudget(100)
    budget.charge(Usage(input_tokens=100), "Supervisor", "s", "claude-sonnet-4-5")
    report = rig.run([say("never sent")], budget)
    assert report.stop == "budget"
    assert report.error and "tokens" in report.error
    assert rig.server.requests == []
    assert budget.spent == 100


@pytest.mark.integration
@needs_cli
def test_the_session_is_interrupted_when_the_budget_runs_out(rig: Rig) -> None:
    budget = TokenBudget(2_000)  # the CLI's own system prompt alone is more than this
    report = rig.run([call(mcp_name("write_note"), text="one"), call(mcp_name("write_note"), text="two")], budget)
    assert report.stop == "budget", report.error
    assert len(rig.bodies()) == 1
    assert report.usage.total == budget.spent > budget.total
    # The input is known from the call's first event; its output in full only if the interrupt lands after the
    # stream's last usage event (the CLI stops reading at the interrupt): then what was streamed is charged.
    full = reported(rig.cache, rig.script)
    assert report.usage.model_copy(update={"output_tokens": full.output_tokens}) == full
    assert 1 <= report.usage.output_tokens <= full.output_tokens


@pytest.mark.integration
@needs_cli
def test_paths_outside_the_workspace_and_the_shell_are_refused(rig: Rig) -> None:
    outside = rig.tmp / "outside"
    (rig.workspace.root / "link").symlink_to(outside)
    agent = ClaudeCodeAgent(rig.settings(shell=False))
    rig.script.steps = [
        call("Read", file_path=str(outside / "secret.txt")),
        call("Read", file_path="../outside/secret.txt"),
        call("Read", file_path="link/secret.txt"),
        call("Write", file_path=str(outside / "planted.txt"), content="x"),
        call("Glob", pattern="/etc/*"),
        call("Bash", command=f"cat {outside / 'secret.txt'} > {outside / 'bash.txt'}"),
        say("I could not read it."),
    ]
    report = agent.run(rig.context(TokenBudget(10_000_000)))
    assert report.stop == "end_turn", report.error
    last = rig.bodies()[-1]
    results = list(tool_results(last).values())
    assert len(results) == 6 and all(r.get("is_error") for r in results)
    assert "TOP-SECRET-CONTENT" not in str(last)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert agent.last_session is not None
    refused = agent.last_session.refusals
    assert len(refused) == 5 and all("outside the workspace" in r for r in refused)  # Bash: no such tool at all


@pytest.mark.integration
@needs_cli
@pytest.mark.skipif(not current_sandbox().isolated, reason="no sandbox isolates here: the session gets no shell")
def test_the_shell_runs_each_command_in_the_sandbox_writes_in_the_workspace_only_no_network(rig: Rig) -> None:
    outside = rig.tmp / "outside"
    port = rig.server.base_url.rsplit(":", 1)[1].split("/")[0]
    probe = f"import socket; s = socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')"
    agent = ClaudeCodeAgent(rig.settings())
    rig.script.steps = [
        call("Bash", command="echo made-inside > inside.txt && cat inside.txt && pwd"),
        call("Bash", command=f"echo planted > {outside / 'planted.txt'}"),
        call("Bash", command=f'python3 -c "{probe}"'),
        call("Bash", command='echo "key=[$ANTHROPIC_API_KEY]"'),
        say("Done."),
    ]
    report = agent.run(rig.context(TokenBudget(10_000_000)))
    assert report.stop == "end_turn", report.error
    made, planted, network, key = (str(r.get("content")) for r in tool_results(rig.bodies()[-1]).values())
    assert "made-inside" in made and str(rig.workspace.root.resolve()) in made
    assert (rig.workspace.root / "inside.txt").read_text() == "made-inside\n"
    assert "Read-only file system" in planted and not (outside / "planted.txt").exists()
    assert "CONNECTED" not in network and ("unreachable" in network or "refused" in network), network
    assert "key=[]" in key and KEY not in key
    assert agent.last_session is not None and agent.last_session.refusals == []


@pytest.mark.integration
@needs_cli
def test_a_long_tool_result_reaches_the_model_whole(rig: Rig) -> None:
    class Long(NoteTool):
        def run(self, args: NoteInput) -> ToolResult:
            return ToolResult(content="x" * 100_000 + "THE-END")

    rig.notes = Long()
    report = rig.run([call(mcp_name("write_note"), text="x"), say("read it")])
    assert report.stop == "end_turn", report.error
    [result] = tool_results(rig.bodies()[-1]).values()
    assert "x" * 100_000 + "THE-END" in str(result["content"])


@pytest.mark.integration
@needs_cli
def test_max_turns_ends_the_session(rig: Rig) -> None:
    steps = [call(mcp_name("write_note"), text=f"note {i}") for i in range(6)]
    report = rig.run(steps, max_turns=2)
    assert report.stop == "max_turns"
    assert len(rig.notes.notes) == 2


@pytest.mark.integration
@needs_cli
def test_an_api_key_the_server_refuses_is_fatal_without_the_key(rig: Rig) -> None:
    """No later session could get past a refused key: the run is told to stop (``FatalLLMError``)."""
    wrong = "sk-wrong-0a1b2c3d4e5f"
    budget = TokenBudget(10_000_000)
    with pytest.raises(FatalLLMError) as caught:
        ClaudeCodeAgent(rig.settings(api_key=wrong)).run(rig.context(budget))
    message = str(caught.value)
    assert "HTTP 401" in message and wrong not in message and KEY not in message
    assert budget.spent == 0


@pytest.mark.integration
@needs_cli
def test_a_tool_that_raises_ends_the_session_and_is_raised_after_it(rig: Rig) -> None:
    class Lost(NoteTool):
        def run(self, args: NoteInput) -> ToolResult:
            raise ConnectionError("the GPU host went away")

    rig.notes = Lost()
    budget = TokenBudget(10_000_000)
    with pytest.raises(ConnectionError, match="GPU host"):
        rig.run([call(mcp_name("write_note"), text="x"), call(mcp_name("write_note"), text="y")], budget)
    assert len(rig.bodies()) <= 2
    assert budget.spent == reported(rig.cache, rig.script).total > 0


@pytest.mark.integration
@needs_cli
def test_a_session_past_its_time_limit_is_an_llm_error(rig: Rig) -> None:
    rig.script.steps = [say("late").model_copy(update={"delay_s": 60.0})]
    started = time.monotonic()
    report = ClaudeCodeAgent(rig.settings(timeout_s=3.0)).run(rig.context(TokenBudget(10_000_000)))
    assert report.stop == "llm_error"
    assert report.error is not None and "3 s limit" in report.error
    assert time.monotonic() - started < 60  # ended by the limit, not by the reply (60 s late)


@pytest.mark.integration
def test_a_missing_cli_is_fatal(rig: Rig) -> None:
    with pytest.raises(FatalLLMError, match="the Claude Code CLI was not found"):
        ClaudeCodeAgent(rig.settings(cli_path=rig.tmp / "no-such-cli")).run(rig.context(TokenBudget(1000)))
    assert rig.server.requests == []


@pytest.mark.integration
def test_a_crashing_cli_is_an_llm_error_with_its_stderr_scrubbed(rig: Rig) -> None:
    fake_cli = rig.tmp / "crashing-cli"
    fake_cli.write_text(f"#!/bin/sh\necho 'fatal: cannot start, key is {KEY}' >&2\nexit 3\n")
    fake_cli.chmod(fake_cli.stat().st_mode | stat.S_IEXEC)
    report = ClaudeCodeAgent(rig.settings(cli_path=fake_cli)).run(rig.context(TokenBudget(1000)))
    assert report.stop == "llm_error"
    assert report.error is not None and "fatal: cannot start, key is ***" in report.error
    assert KEY not in report.error


# --- the pure parts ------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_the_policy_allows_the_workspace_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "escape").symlink_to(tmp_path)
    policy = WorkspacePolicy(root, [mcp_name("compile")], ["Read", "Write", "Glob", "Grep"])
    allowed = [
        ("Read", {"file_path": "src/k.cu"}),
        ("Read", {"file_path": str(root / "src" / "k.cu")}),
        ("Write", {"file_path": "new/file.cu", "content": ""}),
        ("Glob", {"pattern": "**/*.cu"}),
        ("Grep", {"pattern": "\\.\\./", "path": "src"}),
        (mcp_name("compile"), {"path": "/anything"}),
    ]
    refused = [
        ("Read", {"file_path": "/etc/passwd"}),
        ("Read", {"file_path": "../x"}),
        ("Read", {"file_path": "escape/ws2"}),
        ("Read", {"file_path": "~/.ssh/id_rsa"}),
        ("Glob", {"pattern": "../**"}),
        ("Glob", {"pattern": "*", "path": "/"}),
        ("Grep", {"pattern": "x", "glob": "/etc/*"}),
        ("Edit", {"file_path": "src/k.cu"}),
        ("Bash", {"command": "ls"}),
        (mcp_name("profile"), {}),
    ]
    assert [policy.problem(t, i) for t, i in allowed] == [None] * len(allowed)
    assert all(policy.problem(t, i) for t, i in refused)


@pytest.mark.unit
def test_file_tools_follow_the_roles_own_file_tools() -> None:
    assert builtin_tools(["view", "compile"]) == ["Read", "Glob", "Grep"]
    assert builtin_tools(["view", "str_replace"]) == ["Read", "Glob", "Grep", "Write", "Edit"]
    assert builtin_tools(["evaluate"]) == []


@pytest.mark.unit
def test_the_meter_follows_calls_through_the_stream() -> None:
    meter = CallMeter()
    start = {
        "type": "message_start",
        "message": {"model": "m", "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5}},
    }
    assert meter.feed(start) is None
    assert meter.in_flight == Usage(input_tokens=10, output_tokens=1, cache_read_input_tokens=5)
    meter.feed({"type": "message_delta", "usage": {"output_tokens": 40}})
    finished = meter.feed({"type": "message_stop"})
    assert finished == Usage(input_tokens=10, output_tokens=40, cache_read_input_tokens=5)
    assert meter.feed(start) is None and meter.close() is not None and meter.calls == 2 and meter.model == "m"


@pytest.mark.unit
def test_the_results_total_prefers_the_per_model_breakdown() -> None:
    usage = {"input_tokens": 3, "output_tokens": 4}
    per_model = {
        "a": {"inputTokens": 3, "outputTokens": 4, "cacheReadInputTokens": 2, "cacheCreationInputTokens": 1},
        "b": {"inputTokens": 10, "outputTokens": 1, "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0},
    }
    assert result_usage(usage, per_model) == Usage(
        input_tokens=13, output_tokens=5, cache_creation_input_tokens=1, cache_read_input_tokens=2
    )
    assert result_usage(usage, None) == Usage(input_tokens=3, output_tokens=4)
    assert remainder(Usage(input_tokens=5, output_tokens=1), Usage(input_tokens=2, output_tokens=3)) == Usage(
        input_tokens=3
    )


@pytest.mark.unit
def test_the_prompt_has_mission_brief_and_task_once() -> None:
    task = TaskPrompt(
        kernel="scale_add",
        language="cpp",
        target="cpu",
        entry_file="k.cpp",
        entry="scale_add",
        definition_summary="scale_add_f32 (elementwise)",
        constraints="(none)",
        knowledge="-O3 helps",
    )
    a = Assignment(role=ROLE, agent_id="a1", kernel="scale_add", brief="Try AVX.", round=2)
    text = session_prompt(a, ["Read", "mcp__evoteam__compile"], task)
    assert text.startswith("Make scale_add faster. Tools: Read, mcp__evoteam__compile.")
    assert text.count("Try AVX.") == 1 and "round 2" in text
    assert text.count("scale_add_f32 (elementwise)") == 1 and "-O3 helps" in text
    briefed = ROLE.model_copy(update={"mission": "Do $brief for $kernel"})
    text = session_prompt(a.model_copy(update={"role": briefed}), [], None)
    assert text == "Do Try AVX. for scale_add"


@pytest.mark.unit
def test_settings_never_show_the_key() -> None:
    settings = ClaudeCodeSettings(api_key=KEY, env={"OTHER_TOKEN": "tok-123456"})
    shown = repr(settings) + str(settings) + settings.model_dump_json()
    assert KEY not in shown and "tok-123456" not in repr(settings)
    assert scrub(settings, f"key {KEY}, token tok-123456, sk-ant-api03-abcdef") == "key ***, token ***, ***"


class FakeBubblewrap:
    isolated = True
    description = "a fake sandbox"

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        return ["bwrap", "--bind", str(writable[0]), str(writable[0]), "--", *command], {"PATH": "/usr/bin"}


@pytest.mark.unit
def test_shell_commands_are_rewritten_to_run_in_the_sandbox_once(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    confine = sandbox_shell(FakeBubblewrap(), root, {"ANTHROPIC_API_KEY": KEY})
    assert confine is not None
    wrapped = confine("make && ./run 'a b'")
    assert shlex.split(wrapped) == [
        *("env", "-i", "PATH=/usr/bin", "bwrap", "--bind", str(root), str(root), "--", "bash", "-c"),
        f"cd {root} && make && ./run 'a b'",
    ]
    assert KEY not in wrapped
    policy = WorkspacePolicy(root, [], ["Read", "Bash"], confine)
    decided = anyio.run(policy.pre_tool_use, {"tool_name": "Bash", "tool_input": {"command": "ls"}}, None, None)
    output = decided["hookSpecificOutput"]  # type: ignore[typeddict-item]
    assert output["permissionDecision"] == "allow"
    command = output["updatedInput"]["command"]
    assert command == CONFINED + confine("ls") and policy.commands == ["ls"]
    assert policy.confined("Bash", {"command": command}) == {"command": command}  # never twice
    assert policy.problem("Bash", {"command": "sleep 9", "run_in_background": True}) is not None
    unconfined = sandbox_shell(Unsandboxed("a test"), root, {})
    assert unconfined is None
    no_shell = WorkspacePolicy(root, [], ["Read"], None)
    assert "not available" in (no_shell.problem("Bash", {"command": "ls"}) or "")
