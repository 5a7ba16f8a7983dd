"""The offline Knowledge Integrator, Disciplinarian and Reviewer with the real tools on a tiny CPU kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import KERNELS, quick_config, scale_add_task
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.check import CheckResult
from evoteam.roles.agent import AgentEvent
from evoteam.roles.agent_api import AgentContext, AgentReport, Assignment, Submission
from evoteam.roles.budget import TokenBudget
from evoteam.roles.builtin import builtin_role, builtin_roles, parse_verdict
from evoteam.roles.knowledge import Evidence, Kind, KnowledgeStore
from evoteam.roles.offline.roles import (
    OfflineDisciplinarian,
    OfflineIntegrator,
    OfflineProfiler,
    OfflineReviewer,
    cheat_findings,
    plan,
)
from evoteam.roles.prompt import task_prompt
from evoteam.roles.tools import Author
from evoteam.roles.tools.compiler import FakeChecker
from evoteam.roles.tools.evaluation import EvaluationCache, TaskEvaluations
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.workspace import Workspace
from evoteam.supervisor.agents import offline_role


def context(
    tmp_path: Path,
    role_name: str,
    kernel: str,
    evaluator: Evaluator | None = None,
    store: KnowledgeStore | None = None,
    checker: FakeChecker | None = None,
) -> tuple[AgentContext, list[AgentEvent]]:
    """An agent context for ``role_name`` (its tools only) whose workspace holds tests/kernels/``kernel``."""
    task = scale_add_task()
    root = tmp_path / "ws"
    root.mkdir(parents=True)
    shutil.copy(KERNELS / kernel, root / task.source.name)
    workspace = Workspace(root)
    definition = task.load_definition()
    evaluations = EvaluationCache(TaskEvaluations(evaluator, task, quick_config())) if evaluator else None
    services = ToolServices(
        definition,
        evaluations,  # type: ignore[arg-type]  # roles that do not evaluate get no service
        store or KnowledgeStore(tmp_path / "repo", task.name),
        **({"checker": checker} if checker else {}),
    )
    role = builtin_role(role_name)
    author = Author(role=role.name, agent_id="r-1", round=2)
    submissions: list[Submission] = []
    toolbox = build_toolbox(task, workspace, services, author, submissions).only(role.tools)
    assignment = Assignment(role=role, agent_id="r-1", kernel=task.name, round=2)
    prompt = task_prompt(task, definition)
    return AgentContext(assignment, workspace, toolbox, TokenBudget(0), submissions, prompt), []


def verdict(report: AgentReport) -> tuple[str, str]:
    found = parse_verdict(report.final_text)
    assert found is not None, report.final_text
    return found.decision, found.reason


@pytest.mark.unit
def test_each_builtin_role_that_writes_no_code_gets_its_offline_agent() -> None:
    kinds = {name: type(offline_role(role, lambda e: None)).__name__ for name, role in builtin_roles().items()}
    assert kinds["Knowledge Integrator"] == "OfflineIntegrator"
    assert kinds["Disciplinarian"] == "OfflineDisciplinarian"
    assert kinds["Reviewer"] == "OfflineReviewer"
    assert kinds["Profiling Scientist"] == "OfflineProfiler"
    listing_only = builtin_role("Reviewer").model_copy(update={"tools": ["view", "list"]})
    assert offline_role(listing_only, lambda e: None) is None  # nothing it could do: it sits out


@pytest.mark.integration
def test_the_disciplinarian_approves_a_kernel_that_compiles(tmp_path: Path) -> None:
    ctx, _ = context(tmp_path, "Disciplinarian", "honest.cpp")
    events: list[AgentEvent] = []
    report = OfflineDisciplinarian(events.append).run(ctx)
    assert verdict(report) == ("approve", "")
    assert [e.tool for e in events] == ["compile"] and report.error is None


@pytest.mark.integration
def test_the_disciplinarian_vetoes_a_kernel_that_does_not_compile(tmp_path: Path) -> None:
    ctx, _ = context(tmp_path, "Disciplinarian", "compile_error.cpp")
    decision, reason = verdict(OfflineDisciplinarian().run(ctx))
    assert decision == "veto" and reason.startswith("the kernel does not compile:")
    assert "error" in reason


@pytest.mark.unit
def test_the_disciplinarian_vetoes_a_broken_constraint(tmp_path: Path) -> None:
    broken = CheckResult(ok=True, violations=["required instruction 'wgmma.mma_async' does not appear"])
    ctx, _ = context(tmp_path, "Disciplinarian", "honest.cpp", checker=FakeChecker(broken))
    decision, reason = verdict(OfflineDisciplinarian().run(ctx))
    assert decision == "veto" and "wgmma.mma_async" in reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kernel", "line"), [("pointer_cache.cpp", 6), ("timing_cheat.cpp", 4), ("sets_threads.py", 7)]
)
def test_cheating_patterns_of_the_adversarial_kernels_are_found_with_their_line(kernel: str, line: int) -> None:
    [finding] = cheat_findings((KERNELS / kernel).read_text())
    assert f"at line {line}:" in finding


@pytest.mark.unit
def test_honest_kernels_and_comments_raise_nothing() -> None:
    for kernel in ("honest.cpp", "tunable_scale_add.cpp", "honest.py"):
        assert cheat_findings((KERNELS / kernel).read_text()) == [], kernel
    commented = "// never use clock() or a static int counter here\n# setenv is not called\nint f(int x);\n"
    assert cheat_findings(commented) == []
    assert cheat_findings("static inline float f(float x) { return x; }\nstatic const int k = 3;\n") == []


@pytest.mark.integration
def test_the_reviewer_calls_a_pointer_cache_suspicious_and_records_it(tmp_path: Path, evaluator: Evaluator) -> None:
    store = KnowledgeStore(tmp_path / "repo", "scale_add")
    ctx, _ = context(tmp_path, "Reviewer", "pointer_cache.cpp", evaluator, store)
    events: list[AgentEvent] = []
    report = OfflineReviewer(events.append).run(ctx)
    decision, reason = verdict(report)
    assert decision == "suspicious" and "line 6" in reason
    assert [e.tool for e in events] == ["view", "evaluate", "write_note"]
    [note] = store.query(Kind.FAILED_ATTEMPT)
    assert note.role == "Reviewer" and "static" in note.body


@pytest.mark.integration
def test_the_reviewer_approves_an_honest_kernel_and_flags_an_implausible_jump(
    tmp_path: Path, evaluator: Evaluator
) -> None:
    ctx, _ = context(tmp_path, "Reviewer", "honest.cpp", evaluator)
    report = OfflineReviewer().run(ctx)
    assert verdict(report) == ("approve", "")
    assert "measured" in report.final_text and "x geomean" in report.final_text
    measured = float(report.final_text.split("measured ")[1].split("x")[0])
    ctx, _ = context(tmp_path / "again", "Reviewer", "honest.cpp", evaluator)
    # the same kernel, now 1000 times the best so far: its second measurement, however noisy, is a jump over 10x
    ctx.assignment.brief = f"Best so far: r01-x at {measured / 1000:.6f}x geomean (your workspace holds it)."
    again = OfflineReviewer().run(ctx)
    decision, reason = verdict(again)
    assert decision == "suspicious" and "times the best so far" in reason, again.final_text
    ctx, _ = context(tmp_path / "third", "Reviewer", "honest.cpp", evaluator)
    ctx.assignment.brief = f"Best so far: r01-x at {measured:.3f}x geomean (your workspace holds it)."
    assert verdict(OfflineReviewer().run(ctx))[0] == "approve"  # the same kernel again (small kernels vary a few x)


@pytest.mark.unit
def test_the_integrator_writes_a_plan_from_the_numbers_in_the_store(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path / "repo", "scale_add")
    store.add(
        Kind.STRATEGY,
        "offline tuner: best BLOCK=128 — 1.840x geomean",
        evidence=Evidence(candidate="c1", status="PASSED", numbers={"geomean_speedup": 1.84}),
        role="Optimizer",
        round=1,
    )
    store.add(
        Kind.STRATEGY,
        "offline tuner: best BLOCK=64 — 1.210x geomean",
        evidence=Evidence(candidate="c0", status="PASSED", numbers={"geomean_speedup": 1.21}),
        role="Optimizer",
        round=1,
    )
    store.add(Kind.STRATEGY, "vectorize the loads", role="Explorer", round=1)  # no numbers
    for _ in range(2):
        store.add(Kind.FAILED_ATTEMPT, "offline tuner: BLOCK=8192 failed (COMPILE_ERROR)", role="Optimizer", round=1)
    ctx, _ = context(tmp_path, "Knowledge Integrator", "honest.cpp", store=store)
    report = OfflineIntegrator().run(ctx)
    [written] = store.query(Kind.PLAN)
    assert written.title == "plan after round 2: best 1.840x, 2 failed attempt(s) recorded"
    assert written.role == "Knowledge Integrator" and written.round == 2
    body = written.body.splitlines()
    assert body[1] == "- offline tuner: best BLOCK=128 — 1.840x geomean (round 1, 1.840x geomean)"
    assert body[2].startswith("- offline tuner: best BLOCK=64")  # ordered by the measured speedup
    assert any(line.startswith("Unverified: 1 strategy note(s)") for line in body)
    assert any("BLOCK=8192 failed (COMPILE_ERROR) (2x)" in line for line in body)
    assert "1. profile the best kernel: there is no hardware observation yet" in body
    assert report.final_text.startswith(written.title)
    assert store.summary().startswith(f"Current plan: {written.title}")  # the next team's prompts start with it


@pytest.mark.unit
def test_the_plan_of_an_empty_store_invents_nothing() -> None:
    title, body = plan([], 1)
    assert title == "plan after round 1: no verified strategy yet, 0 failed attempt(s) recorded"
    assert "- nothing yet" in body and "x geomean" not in body


@pytest.mark.integration
def test_the_profiler_records_a_hardware_note(tmp_path: Path, evaluator: Evaluator) -> None:
    store = KnowledgeStore(tmp_path / "repo", "scale_add")
    ctx, _ = context(tmp_path, "Profiling Scientist", "honest.cpp", evaluator, store)
    report = OfflineProfiler().run(ctx)
    assert report.error is None
    [note] = store.query(Kind.HARDWARE)
    assert note.title.startswith("profile of round 2:") and note.role == "Profiling Scientist"
