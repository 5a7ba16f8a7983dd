"""``OfflineTunerAgent`` through fake tools (the real tools' names and inputs) and end to end with the real ones."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import quick_config
from conftest import scale_add_task as shared_scale_add_task
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.schema import BuildSpec, Solution, SourceFile
from evoteam.gpu_bench.task import KernelTask
from evoteam.roles.agent import AgentEvent
from evoteam.roles.agent_api import AgentContext, AgentReport, Assignment, Submission
from evoteam.roles.budget import TokenBudget
from evoteam.roles.builtin import builtin_role
from evoteam.roles.knowledge import Kind, KnowledgeStore, measured_kind
from evoteam.roles.llm import Usage
from evoteam.roles.offline.agent import OfflineTunerAgent
from evoteam.roles.offline.knobs import nothing_to_tune
from evoteam.roles.tools import Author, Tool, Toolbox, ToolResult
from evoteam.roles.tools.candidate import SubmitInput, seed_workspace, workspace_solution
from evoteam.roles.tools.evaluation import EvaluateInput, EvaluationCache, TaskEvaluations
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.tools.files import ViewInput, WriteInput
from evoteam.roles.tools.notes import ReadKnowledgeInput, WriteNoteInput
from evoteam.roles.workspace import Workspace

KERNEL = """#include <cstdint>
#define BLOCK 256
#define UNROLL 2
extern "C" int k(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += BLOCK * UNROLL) x[i] = 0;
  return 0;
}
"""


def knob(source: str, name: str) -> int:
    match = re.search(rf"#define {name} (\d+)", source)
    assert match is not None, name
    return int(match.group(1))


def landscape(source: str) -> dict[str, Any]:
    """Summary data like the evaluate tool's: BLOCK >= 1024 does not compile; the best is BLOCK=128 UNROLL=4."""
    block, unroll = knob(source, "BLOCK"), knob(source, "UNROLL")
    if block >= 1024:
        return {"status": "COMPILE_ERROR", "geomean_speedup": None, "solution": f"v{block}", "failures": []}
    speedup = 2.0 - 0.1 * abs(block.bit_length() - 8) - 0.05 * abs(unroll - 4)
    return {"status": "PASSED", "geomean_speedup": speedup, "mean_speedup": speedup, "faster": 3, "total": 3}


class FakeTool:
    def __init__(self, name: str, model: type[BaseModel], run: Callable[[Any], ToolResult]) -> None:
        self.name, self.description, self.input_model, self._run = name, f"fake {name}", model, run

    def run(self, args: Any) -> ToolResult:
        return self._run(args)


class Fakes:
    """In-memory files, evaluations and notes behind tools with the real tools' names and input models. ``view``
    numbers lines like the real one and shows at most ``view_lines`` lines a call (asking for more like it)."""

    def __init__(self, source: str = KERNEL, respond: Callable[[str], dict[str, Any]] = landscape) -> None:
        self.files = {"k.cpp": source}
        self.respond = respond
        self.evaluated: list[str] = []
        self.notes: list[WriteNoteInput] = []
        self.calls: list[str] = []
        self.view_lines = 1000

    def view(self, a: ViewInput) -> ToolResult:
        if a.path not in self.files:
            return ToolResult(content=f"{a.path!r} does not exist", is_error=True)
        lines = self.files[a.path].splitlines()
        first = a.start_line or 1
        shown = [f"{n:>5}\t{lines[n - 1]}" for n in range(first, min(len(lines), first + self.view_lines - 1) + 1)]
        if first + len(shown) <= len(lines):
            shown.append(f"... (cut at line {first + len(shown) - 1}; ask for start_line={first + len(shown)})")
        return ToolResult(content="\n".join(shown), data={"path": a.path, "lines": len(lines)})

    def write(self, a: WriteInput) -> ToolResult:
        self.files[a.path] = a.content
        return ToolResult(content=f"wrote {a.path}", data={"path": a.path, "bytes": len(a.content)})

    def evaluate(self, a: EvaluateInput) -> ToolResult:
        self.evaluated.append(self.files["k.cpp"])
        data = self.respond(self.files["k.cpp"])
        return ToolResult(content=f"status: {data['status']}", data=data)

    def read_knowledge(self, a: ReadKnowledgeInput) -> ToolResult:
        words = (a.query or "").lower().split()
        found = [
            n
            for n in reversed(self.notes)
            if (a.kind is None or n.kind == a.kind) and all(w in n.title.lower() for w in words)
        ]
        return ToolResult(content="\n".join(f"[{n.kind}] {n.title}: {n.body}" for n in found) or "no entries match")

    def write_note(self, a: WriteNoteInput) -> ToolResult:
        self.notes.append(a)
        return ToolResult(content=f"recorded {a.kind} note", data={"kind": a.kind})

    def toolbox(
        self,
        submissions: list[Submission],
        leave_out: tuple[str, ...] = (),
        replace: dict[str, Callable[[Any], ToolResult]] | None = None,
    ) -> Toolbox:
        def submit(a: SubmitInput) -> ToolResult:
            spec = BuildSpec(language="cpp", target_hardware=["cpu"], entry_point="k.cpp::k")
            solution = Solution(
                name=f"sub{len(submissions)}", definition="d", author="tuner", spec=spec,
                sources=[SourceFile(path="k.cpp", content=self.files["k.cpp"])],
            )  # fmt: skip
            data = self.respond(self.files["k.cpp"])
            submissions.append(Submission(solution=solution, rationale=a.rationale, role="Optimizer", agent_id="t-1"))
            return ToolResult(content="submitted", data=data)

        def logged(name: str, run: Callable[[Any], ToolResult]) -> Callable[[Any], ToolResult]:
            def call(args: Any) -> ToolResult:
                self.calls.append(name)
                return run(args)

            return call

        specs: list[tuple[str, type[BaseModel], Callable[[Any], ToolResult]]] = [
            ("view", ViewInput, self.view),
            ("write", WriteInput, self.write),
            ("evaluate", EvaluateInput, self.evaluate),
            ("read_knowledge", ReadKnowledgeInput, self.read_knowledge),
            ("write_note", WriteNoteInput, self.write_note),
            ("submit_candidate", SubmitInput, submit),
        ]
        swap = replace or {}
        tools: list[Tool] = [
            FakeTool(n, model, logged(n, swap.get(n, run))) for n, model, run in specs if n not in leave_out
        ]
        return Toolbox(tools)


def context(toolbox: Toolbox, submissions: list[Submission], tmp_path: Path) -> AgentContext:
    assignment = Assignment(role=builtin_role("Optimizer"), agent_id="t-1", kernel="k", round=1)
    return AgentContext(assignment, Workspace(tmp_path), toolbox, TokenBudget(0), submissions)


def tune(fakes: Fakes, tmp_path: Path, **options: Any) -> tuple[AgentReport, list[Submission]]:
    submissions: list[Submission] = []
    leave_out = options.pop("leave_out", ())
    agent = OfflineTunerAgent(options.pop("max_evaluations", 30), options.pop("seed", 0), source="k.cpp", **options)
    report = agent.run(context(fakes.toolbox(submissions, leave_out), submissions, tmp_path))
    return report, submissions


@pytest.mark.unit
def test_it_tunes_the_knobs_writes_the_best_back_and_submits_it(tmp_path: Path) -> None:
    fakes = Fakes()
    report, submissions = tune(fakes, tmp_path, max_evaluations=30)
    assert report.stop == "end_turn" and report.error is None
    assert report.usage == Usage() and report.turns == len(fakes.calls)  # no tokens, and the budget (0) sufficed
    assert (knob(fakes.files["k.cpp"], "BLOCK"), knob(fakes.files["k.cpp"], "UNROLL")) == (128, 4)
    [submission] = report.submissions
    assert submission in submissions
    assert submission.rationale.startswith("offline knob tuning: BLOCK=128 UNROLL=4 gives 2.000x geomean")
    assert "source's own values 1.800x" in submission.rationale
    assert 1 < len(fakes.evaluated) <= 30 and len(set(fakes.evaluated)) == len(fakes.evaluated)
    assert fakes.evaluated[0] == KERNEL  # the source's own values first
    for source in fakes.evaluated:  # every variant differs from the kernel in the knobs' numbers only
        assert re.sub(r"\d+", "#", source) == re.sub(r"\d+", "#", KERNEL)
    assert fakes.calls[0] == "view" and fakes.calls[-1] == "submit_candidate"
    assert list(tmp_path.iterdir()) == []  # the workspace folder is never touched but through the tools


@pytest.mark.unit
def test_failures_are_recorded_as_notes_and_a_later_run_skips_them(tmp_path: Path) -> None:
    fakes = Fakes()
    tune(fakes, tmp_path, max_evaluations=30, seed=1)
    failed = [s for s in fakes.evaluated if knob(s, "BLOCK") >= 1024]
    notes = [n for n in fakes.notes if n.kind == "failed_attempt"]
    assert failed and len(notes) == len(failed)
    for note, source in zip(notes, failed, strict=True):
        config = {"BLOCK": knob(source, "BLOCK"), "UNROLL": knob(source, "UNROLL")}
        assert note.title == f"offline tuner: BLOCK={config['BLOCK']} UNROLL={config['UNROLL']} failed (COMPILE_ERROR)"
        assert note.body.startswith(f"config: {json.dumps(config)}")
        assert note.evidence is not None and note.evidence.status == "COMPILE_ERROR"
    [best] = [n for n in fakes.notes if n.kind == "strategy"]
    assert best.title.startswith("offline tuner: best BLOCK=128 UNROLL=4 — 2.000x geomean")
    assert best.evidence is not None and best.evidence.numbers["geomean_speedup"] == 2.0

    first = set(fakes.evaluated)
    fakes.evaluated.clear()
    fakes.files["k.cpp"] = KERNEL
    tune(fakes, tmp_path, max_evaluations=30, seed=1)  # the same seed would propose the same failures first
    assert fakes.evaluated and not set(fakes.evaluated) & set(failed)
    assert set(fakes.evaluated) & first  # passing configs are not skipped


@pytest.mark.unit
def test_evaluations_stop_at_the_wall_time_and_the_best_so_far_is_submitted(tmp_path: Path) -> None:
    fakes = Fakes()
    now = [0.0]

    def clock() -> float:
        now[0] += 10.0
        return now[0]

    report, _ = tune(fakes, tmp_path, max_evaluations=30, max_wall_s=45.0, clock=clock)
    assert 1 <= len(fakes.evaluated) <= 5
    assert len(report.submissions) == 1 and report.stop == "end_turn"


@pytest.mark.unit
def test_a_kernel_without_knobs_is_left_alone(tmp_path: Path) -> None:
    plain = 'extern "C" int k(float* x) { x[0] = 1; return 0; }\n'
    fakes = Fakes(source=plain)
    report, submissions = tune(fakes, tmp_path)
    assert not submissions and report.stop == "end_turn" and "no tunable knobs" in report.final_text
    assert fakes.files["k.cpp"] == plain and fakes.calls == ["view"]


@pytest.mark.unit
def test_when_every_config_fails_the_source_is_restored_and_nothing_submitted(tmp_path: Path) -> None:
    fakes = Fakes(respond=lambda s: {"status": "RUNTIME_ERROR", "failures": [{"reason": "segfault"}]})
    report, submissions = tune(fakes, tmp_path, max_evaluations=6)
    assert not submissions and "no config passed (6 tried" in report.final_text
    assert fakes.files["k.cpp"] == KERNEL
    assert [n.kind for n in fakes.notes] == ["failed_attempt"] * 6
    assert fakes.notes[0].body.endswith("status RUNTIME_ERROR: segfault")


@pytest.mark.unit
def test_a_role_without_the_needed_tools_gets_an_error_report(tmp_path: Path) -> None:
    report, _ = tune(Fakes(), tmp_path, leave_out=("evaluate",))
    assert report.error is not None and "evaluate" in report.error and report.turns == 0


@pytest.mark.unit
def test_without_knowledge_tools_it_still_tunes(tmp_path: Path) -> None:
    fakes = Fakes()
    report, submissions = tune(fakes, tmp_path, max_evaluations=8, leave_out=("read_knowledge", "write_note"))
    assert len(submissions) == 1 and report.error is None and not fakes.notes


@pytest.mark.unit
def test_a_cancel_request_stops_it_and_restores_the_source(tmp_path: Path) -> None:
    fakes = Fakes()
    report, submissions = tune(fakes, tmp_path, should_stop=lambda: len(fakes.evaluated) >= 3)
    assert report.stop == "cancelled" and not submissions and len(fakes.evaluated) == 3
    assert fakes.files["k.cpp"] == KERNEL


@pytest.mark.unit
def test_a_long_file_is_read_whole_through_view_s_pages(tmp_path: Path) -> None:
    source = KERNEL + "".join(f"// filler line {i}\n" for i in range(40))
    fakes = Fakes(source=source)
    fakes.view_lines = 7
    tune(fakes, tmp_path, max_evaluations=3)
    assert fakes.calls.count("view") == 7
    assert fakes.evaluated[0] == source


@pytest.mark.unit
def test_events_report_every_tool_call_and_the_stop(tmp_path: Path) -> None:
    fakes = Fakes()
    events: list[AgentEvent] = []
    tune(fakes, tmp_path, max_evaluations=4, on_event=events.append)
    assert [e.tool for e in events if e.kind == "tool"] == fakes.calls
    assert events[-1].kind == "stop" and events[-1].stop == "end_turn" and events[-1].usage == Usage()
    writes = [e for e in events if e.tool == "write"]
    assert writes and all("chars>" in e.input for e in writes)  # sources are not copied into the journal


@pytest.mark.unit
def test_for_task_takes_the_entry_file_declared_knobs_and_language() -> None:
    task = scale_add_task(knobs={"BLOCK": [64, 256, 8192]})
    agent = OfflineTunerAgent.for_task(task, max_evaluations=3, seed=2)
    assert agent.source == "tunable_scale_add.cpp" and agent.knobs == {"BLOCK": [64, 256, 8192]}
    assert agent.cuda is False and agent.max_evaluations == 3 and agent.seed == 2


# -- end to end with the real tools and evaluator -------------------------------------------------------------------


def scale_add_task(**changes: object) -> KernelTask:
    return shared_scale_add_task("tunable_scale_add.cpp", **changes)


class Counting:
    def __init__(self, inner: TaskEvaluations) -> None:
        self.inner, self.blocks = inner, list[int]()

    def evaluate(self, solution: Solution, baseline: Solution | None = None) -> CandidateResult:
        self.blocks.append(knob(solution.sources[0].content, "BLOCK"))
        return self.inner.evaluate(solution, baseline)


@pytest.mark.integration
@pytest.mark.slow
def test_end_to_end_with_the_real_tools_on_a_tiny_cpu_kernel(tmp_path: Path, evaluator: Evaluator) -> None:
    task = scale_add_task(knobs={"BLOCK": [64, 256, 8192]})
    knowledge = KnowledgeStore(tmp_path / "repo", "scale_add")
    definition = task.load_definition()
    role = builtin_role("Optimizer")

    def run(folder: str) -> tuple[AgentReport, Counting, Workspace]:
        workspace = seed_workspace(task, tmp_path / folder)
        start = workspace_solution(task, workspace, definition.name, name="start", author="user")
        service = Counting(TaskEvaluations(evaluator, task, quick_config(), baseline=start))  # the incumbent
        services = ToolServices(definition, EvaluationCache(service), knowledge)
        submissions: list[Submission] = []
        toolbox = build_toolbox(task, workspace, services, Author(role=role.name, agent_id="tuner-1"), submissions)
        assignment = Assignment(role=role, agent_id="tuner-1", kernel=task.name)
        ctx = AgentContext(assignment, workspace, toolbox.only(role.tools), TokenBudget(0), submissions)
        return OfflineTunerAgent.for_task(task, max_evaluations=3).run(ctx), service, workspace

    report, service, workspace = run("ws1")
    assert sorted(service.blocks) == [64, 256, 8192]  # three configs; the submission reused its evaluation
    [submission] = report.submissions
    assert submission.evaluation is not None and submission.evaluation["status"] == "PASSED"
    best = knob((workspace.root / "tunable_scale_add.cpp").read_text(), "BLOCK")
    assert best in (64, 256) and f"BLOCK={best} gives" in submission.rationale
    assert knob(submission.solution.sources[0].content, "BLOCK") == best
    [failed] = [e for e in knowledge.entries() if "8192" in e.title]
    assert failed.title == "offline tuner: BLOCK=8192 failed (COMPILE_ERROR)" and failed.kind == Kind.FAILED_ATTEMPT
    assert failed.evidence is not None and failed.evidence.status == "COMPILE_ERROR"
    [noted] = [e for e in knowledge.entries() if e.title.startswith(f"offline tuner: best BLOCK={best}")]
    assert noted.evidence is not None and noted.evidence.speedup is not None  # measured against the start
    assert noted.kind == measured_kind(noted.evidence.status or "", noted.evidence.ci)
    assert report.usage == Usage() and report.stop == "end_turn"

    report, service, _ = run("ws2")  # the same store: configs recorded as failed attempts are not tried again
    configs = [re.search(r"config: (\{[^\n]*?\})", e.body) for e in knowledge.query(Kind.FAILED_ATTEMPT)]
    failed_blocks = {json.loads(c.group(1))["BLOCK"] for c in configs if c is not None}
    assert sorted(service.blocks) == [b for b in (64, 256) if b not in failed_blocks] and len(report.submissions) == 1


@pytest.mark.unit
def test_a_broken_evaluate_tool_stops_it_with_the_source_restored(tmp_path: Path) -> None:
    fakes = Fakes()
    submissions: list[Submission] = []
    broken = {"evaluate": lambda a: ToolResult(content="the task cannot be evaluated", is_error=True)}
    toolbox = fakes.toolbox(submissions, replace=broken)
    report = OfflineTunerAgent(5, source="k.cpp").run(context(toolbox, submissions, tmp_path))
    assert report.error == "evaluate failed: the task cannot be evaluated" and not submissions
    assert fakes.files["k.cpp"] == KERNEL


@pytest.mark.unit
def test_duplicate_declared_values_are_an_error_report(tmp_path: Path) -> None:
    report, _ = tune(Fakes(), tmp_path, knobs={"BLOCK": [64, 64]})
    assert report.error is not None and "distinct values" in report.error


def at(block: int, unroll: int) -> str:
    return KERNEL.replace("#define BLOCK 256", f"#define BLOCK {block}").replace(
        "#define UNROLL 2", f"#define UNROLL {unroll}"
    )


@pytest.mark.unit
def test_a_climb_that_beats_nothing_submits_nothing_and_a_later_climb_skips_what_it_tried(tmp_path: Path) -> None:
    fakes = Fakes(source=at(128, 4))  # the landscape's peak: no neighbour beats it
    report, submissions = tune(fakes, tmp_path, max_evaluations=4, strategy="local")
    assert submissions == [] and "no config beat it" in report.final_text and fakes.files["k.cpp"] == at(128, 4)
    assert fakes.evaluated[0] == at(128, 4)  # the kernel as given, then its one-knob neighbours
    [tried] = fakes.notes
    assert (
        tried.kind == "failed_attempt"
        and tried.title == "offline tuner: 3 config(s) tried from BLOCK=128 UNROLL=4, none faster"
    )
    first = set(fakes.evaluated[1:])
    fakes.evaluated.clear()
    tune(fakes, tmp_path, max_evaluations=4, strategy="local")
    assert fakes.evaluated[0] == at(128, 4) and not set(fakes.evaluated) & first  # the next neighbours instead


@pytest.mark.unit
def test_the_debugger_leaves_a_passing_kernel_alone_and_repairs_a_failing_one(tmp_path: Path) -> None:
    fakes = Fakes()
    report, submissions = tune(fakes, tmp_path, max_evaluations=6, strategy="repair")
    assert submissions == [] and "nothing to repair" in report.final_text and fakes.evaluated == [KERNEL]
    assert fakes.notes == []

    broken = Fakes(source=at(1024, 2))  # does not compile; its nearest neighbour that passes is BLOCK=512
    report, submissions = tune(broken, tmp_path, max_evaluations=6, strategy="repair")
    [repaired] = submissions
    assert knob(repaired.solution.sources[0].content, "BLOCK") < 1024
    assert broken.evaluated[0] == at(1024, 2) and len(broken.evaluated) <= 3  # the first passing config wins


@pytest.mark.unit
def test_a_task_with_nothing_to_tune_says_so_before_a_run(tmp_path: Path) -> None:
    flat = tmp_path / "flat.cpp"
    flat.write_text('extern "C" int f(const float* x, float* y, long n) { return 0; }\n')
    task = shared_scale_add_task(source=flat, knobs={})
    why = nothing_to_tune(task)
    assert why is not None and why.startswith("the offline team has nothing to tune in flat.cpp")
    assert "[kernel.knobs]" in why and "--llm anthropic" in why
    assert nothing_to_tune(shared_scale_add_task(source=flat, knobs={"UNROLL": [1, 2, 4]})) is None  # declared
    assert nothing_to_tune(shared_scale_add_task("tunable_scale_add.cpp")) is None  # found in the source
    assert "cannot read" in (nothing_to_tune(shared_scale_add_task(source=tmp_path / "gone.cpp")) or "")
