"""``LoopAgent`` end to end with a scripted model on the scale_add task: tools, the real evaluator, budget, errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import KERNELS, quick_config, scale_add_task
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.schema import Solution
from evoteam.roles.agent import AgentEvent, LoopAgent, limits
from evoteam.roles.agent_api import AgentContext, Assignment, Submission
from evoteam.roles.backends.scripted import ScriptedLLM, Step, text, tool_call
from evoteam.roles.budget import TokenBudget
from evoteam.roles.builtin import builtin_role
from evoteam.roles.knowledge import Kind, KnowledgeStore
from evoteam.roles.llm import Reply, Request, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from evoteam.roles.prompt import task_prompt
from evoteam.roles.tools import Author
from evoteam.roles.tools.candidate import seed_workspace
from evoteam.roles.tools.evaluation import EvaluationCache, TaskEvaluations
from evoteam.roles.tools.factory import ToolServices, build_toolbox

pytestmark = pytest.mark.integration

FASTER = """#include <cstdint>
extern "C" int scale_add(const float* __restrict x, const float* __restrict y, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + x[i] + y[i];
  return 0;
}
"""


class Counting:
    """The real evaluation service, counting its calls."""

    def __init__(self, inner: TaskEvaluations) -> None:
        self.inner = inner
        self.calls = 0

    def evaluate(self, solution: Solution, baseline: Solution | None = None) -> CandidateResult:
        self.calls += 1
        return self.inner.evaluate(solution, baseline)


class Setup:
    def __init__(self, tmp_path: Path, evaluator: Evaluator, role: str = "Optimizer") -> None:
        self.task = scale_add_task()
        self.outside = tmp_path
        self.workspace = seed_workspace(self.task, tmp_path / "ws")
        self.service = Counting(TaskEvaluations(evaluator, self.task, quick_config()))
        self.knowledge = KnowledgeStore(tmp_path / "repo", "scale_add")
        self.knowledge.add(Kind.FAILED_ATTEMPT, "OpenMP over the vector", "slower below 64k elements")
        self.role = builtin_role(role)
        self.submissions: list[Submission] = []
        definition = self.task.load_definition()
        services = ToolServices(definition, EvaluationCache(self.service), self.knowledge)
        author = Author(role=self.role.name, agent_id="opt-1", round=3)
        self.toolbox = build_toolbox(self.task, self.workspace, services, author, self.submissions)
        self.prompt = task_prompt(
            self.task, definition, self.service.inner.workloads, self.knowledge.summary(), self.task.constraints
        )
        self.events: list[AgentEvent] = []

    def context(self, budget: TokenBudget, brief: str = "make it faster", max_turns: int = 10) -> AgentContext:
        assignment = Assignment(
            role=self.role, agent_id="opt-1", kernel="scale_add", round=3, brief=brief, max_turns=max_turns
        )
        return AgentContext(
            assignment=assignment,
            workspace=self.workspace,
            toolbox=self.toolbox.only(self.role.tools),
            budget=budget,
            submissions=self.submissions,
            task=self.prompt,
        )

    def agent(self, steps: list[Step], max_tokens: int = 1000) -> tuple[LoopAgent, ScriptedLLM]:
        llm = ScriptedLLM(steps)
        return LoopAgent(llm, "claude-sonnet-4-5", max_tokens=max_tokens, on_event=self.events.append), llm


@pytest.fixture
def setup(tmp_path: Path, evaluator: Evaluator) -> Setup:
    return Setup(tmp_path, evaluator)


def last_results(request: Request) -> list[ToolResultBlock]:
    message = request.messages[-1]
    assert message.role == "user"
    return [b for b in message.content if isinstance(b, ToolResultBlock)]


def submit_after_a_passing_evaluation(request: Request) -> Reply:
    [result] = last_results(request)
    assert not result.is_error and result.content.startswith("status: PASSED"), result.content
    return tool_call("submit_candidate", {"rationale": "restrict pointers and an add instead of a multiply"})


def test_write_evaluate_submit_round_trip_with_the_real_evaluator(setup: Setup) -> None:
    budget = TokenBudget(1_000_000)
    agent, llm = setup.agent(
        [
            tool_call("view", {"path": "honest.cpp"}, say="Let me read the kernel."),
            tool_call("write", {"path": "honest.cpp", "content": FASTER}),
            tool_call("evaluate", {}),
            submit_after_a_passing_evaluation,
            text("Submitted one candidate: restrict pointers."),
        ]
    )
    report = agent.run(setup.context(budget))

    assert (report.stop, report.turns, report.error) == ("end_turn", 5, None)
    assert report.final_text == "Submitted one candidate: restrict pointers."
    [submission] = report.submissions
    assert submission == setup.submissions[0]
    assert submission.solution.sources[0].content == FASTER
    assert submission.evaluation is not None
    assert submission.evaluation["status"] == "PASSED" and submission.evaluation["total"] == 3
    assert setup.service.calls == 1  # submitting what was just evaluated reuses that evaluation

    first = llm.requests[0]
    assert len(first.system) == 4
    assert first.system[0].startswith("You are the Optimizer of a small team") and "`scale_add`" in first.system[0]
    assert first.system[1].startswith("# Mission: Optimizer")
    assert first.system[2].startswith("# The task: scale_add")
    assert "OpenMP over the vector" in first.system[3]
    assert first.messages[0].content == [
        TextBlock(
            text="Round 3. Your brief from the supervisor:\n\nmake it faster\n\nYour limits this round: at most 10 "
            "turns; 1,000,000 tokens (your role's share of this round; every call's input counts). One reply holds at "
            "most 1,000 tokens: change a long file with patch or str_replace rather than rewriting it whole."
        )
    ]
    assert [t.name for t in first.tools] == setup.role.tools
    assert all(r.system == first.system for r in llm.requests)  # the stable prefix does not change
    [viewed] = last_results(llm.requests[1])
    assert viewed.content.startswith("    1\t#include <cstdint>")
    [submitted] = last_results(llm.requests[4])
    assert re.match(r"submitted r03-opt-1-[0-9a-f]{10} \(1 submission", submitted.content), submitted.content

    [account] = budget.accounts()
    assert (account.role, account.agent, account.calls) == ("Optimizer", "opt-1", 5)
    assert account.usage == report.usage and budget.spent == report.usage.total > 0
    assert account.usd > 0  # priced as the agent's model
    kinds = [(e.kind, e.tool) for e in setup.events]
    assert kinds == [
        ("turn", None), ("tool", "view"),
        ("turn", None), ("tool", "write"),
        ("turn", None), ("tool", "evaluate"),
        ("turn", None), ("tool", "submit_candidate"),
        ("turn", None), ("stop", None),
    ]  # fmt: skip
    evaluate_event = setup.events[5]
    assert evaluate_event.data is not None and evaluate_event.data["status"] == "PASSED"
    assert setup.events[-1].stop == "end_turn" and setup.events[-1].usage == report.usage


def test_budget_exhausted_mid_conversation_stops_cleanly_and_is_recorded(setup: Setup) -> None:
    budget = TokenBudget(20_000)
    expensive = tool_call("write", {"path": "notes.txt", "content": "first step"}).model_copy(
        update={"usage": Usage(input_tokens=18_000, output_tokens=1_000)}
    )
    agent, llm = setup.agent([expensive, text("never sent")], max_tokens=1000)
    report = agent.run(setup.context(budget))

    assert report.stop == "budget" and report.turns == 1
    assert report.error is not None and "Optimizer/opt-1: the call needs up to" in report.error
    assert "but 1000 remain in the budget" in report.error
    assert len(llm.requests) == 1  # the second call was never made
    assert (setup.workspace.root / "notes.txt").read_text() == "first step"  # the first turn's tool still ran
    assert budget.spent == 19_000 and report.usage.total == 19_000
    stop = setup.events[-1]
    assert (stop.kind, stop.stop, stop.error) == ("stop", "budget", report.error)


def test_a_budget_too_small_for_the_first_call_makes_no_call(setup: Setup) -> None:
    agent, llm = setup.agent([text("never")])
    report = agent.run(setup.context(TokenBudget(100)))
    assert (report.stop, report.turns, llm.requests) == ("budget", 0, [])


def test_malformed_tool_input_is_returned_to_the_model_and_the_loop_goes_on(setup: Setup) -> None:
    agent, llm = setup.agent(
        [
            tool_call("str_replace", {"path": "honest.cpp", "old": 5}),
            tool_call("view", {"path": "honest.cpp", "start_line": 1, "end_line": 1}),
            text("done"),
        ]
    )
    report = agent.run(setup.context(TokenBudget(1_000_000)))
    assert (report.stop, report.turns) == ("end_turn", 3)
    [bad] = last_results(llm.requests[1])
    assert bad.is_error
    assert "invalid input for str_replace" in bad.content and "old: Input should be a valid string" in bad.content
    assert "new: Field required" in bad.content
    [good] = last_results(llm.requests[2])
    assert not good.is_error and good.content == "    1\t#include <cstdint>"
    assert setup.events[1].is_error and not setup.events[3].is_error


def test_path_traversal_is_refused_and_the_model_told(setup: Setup) -> None:
    both = Reply(
        content=[
            TextBlock(text="Let me look around."),
            ToolUseBlock(id="t1", name="view", input={"path": "../../../../etc/passwd"}),
            ToolUseBlock(id="t2", name="write", input={"path": "../escaped.txt", "content": "x"}),
            ToolUseBlock(id="t3", name="view", input={"path": "/etc/hostname"}),
        ],
        stop_reason="tool_use",
        usage=Usage(),
        model="scripted",
    )
    agent, llm = setup.agent([both, text("I stay in the workspace.")])
    report = agent.run(setup.context(TokenBudget(1_000_000)))
    assert report.stop == "end_turn"
    results = last_results(llm.requests[1])
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3"]
    assert all(r.is_error for r in results)
    assert "outside the workspace" in results[0].content and "outside the workspace" in results[1].content
    assert "is absolute" in results[2].content
    assert "root:" not in results[0].content
    assert not (setup.outside / "escaped.txt").exists()


def test_a_tool_the_role_lacks_is_refused(tmp_path: Path, evaluator: Evaluator) -> None:
    setup = Setup(tmp_path, evaluator, role="Reviewer")
    agent, llm = setup.agent([tool_call("write", {"path": "honest.cpp", "content": "// gone"}), text("ok")])
    agent.run(setup.context(TokenBudget(1_000_000)))
    [refused] = last_results(llm.requests[1])
    assert refused.is_error and "no tool named 'write'" in refused.content
    assert (setup.workspace.root / "honest.cpp").read_text() == (KERNELS / "honest.cpp").read_text()


def test_llm_error_ends_the_loop_with_its_message(setup: Setup) -> None:
    agent, _ = setup.agent([tool_call("list", {})])  # the script runs out on the second call
    report = agent.run(setup.context(TokenBudget(1_000_000)))
    assert (report.stop, report.turns, report.error) == ("llm_error", 1, "the script has no more replies")


def test_max_turns_and_cancel(setup: Setup) -> None:
    agent, _ = setup.agent([tool_call("list", {}) for _ in range(5)])
    report = agent.run(setup.context(TokenBudget(1_000_000), max_turns=2))
    assert (report.stop, report.turns) == ("max_turns", 2)
    cancelled = LoopAgent(ScriptedLLM([text("never")]), "m", should_stop=lambda: True)
    assert cancelled.run(setup.context(TokenBudget(1_000_000))).stop == "cancelled"


def test_an_empty_brief_still_starts_the_conversation_and_the_task_prompt_is_required(setup: Setup) -> None:
    agent, llm = setup.agent([text("nothing to do")])
    agent.run(setup.context(TokenBudget(1_000_000), brief=""))
    [opening] = llm.requests[0].messages[0].content
    assert isinstance(opening, TextBlock)
    assert opening.text.startswith("Round 3. There is no particular brief this round: work on your mission.\n\n")
    assert "Your limits this round: at most 10 turns; 1,000,000 tokens" in opening.text
    context = setup.context(TokenBudget(1_000_000))
    context.task = None
    with pytest.raises(ValueError, match=r"needs context.task"):
        agent.run(context)


def test_the_limits_name_the_evaluations_when_the_run_has_an_evaluation_budget(setup: Setup) -> None:
    context = dataclasses.replace(setup.context(TokenBudget(50_000)), evaluations=5)
    said = limits(context, 2048)
    assert "at most 10 turns; 50,000 tokens" in said and "; 5 calls of evaluate." in said
    assert "One reply holds at most 2,048 tokens" in said
    assert "evaluate" not in limits(setup.context(TokenBudget(50_000)), 2048).split(".")[0]
