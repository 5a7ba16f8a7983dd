"""Evaluating a candidate for an agent: the ``EvaluationService`` seam, its real adapter and fake, a content
cache, and the ``evaluate`` tool."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from evoteam.gpu_bench.api import (
    BenchInputError,
    BuildResult,
    CandidateResult,
    Constraints,
    Definition,
    EvalConfig,
    EvaluationStatus,
    Evaluator,
    KernelTask,
    Solution,
    TimingStats,
    Workload,
    WorkloadResult,
    overall_status,
    summarize,
)
from evoteam.roles.budget import EvaluationShare
from evoteam.roles.tools import render
from evoteam.roles.tools.base import Author, Tool, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.workspace import Workspace


class EvaluationService(Protocol):
    def evaluate(self, solution: Solution, baseline: Solution | None = None) -> CandidateResult:
        """Every workload of the task, against its baseline (or ``baseline``). Raises ``BenchInputError``
        only when the task itself is unusable (its baseline fails), never for a bad candidate."""
        ...


@runtime_checkable
class ScratchService(Protocol):
    def check(self, solution: Solution, workloads: list[Workload]) -> CandidateResult:
        """Correctness only (no timing) of ``solution`` on ``workloads`` made up on the spot (an agent's scratch
        test), against the task's reference."""
        ...


class TaskEvaluations:
    """The real service: ``Evaluator`` over one ``KernelTask`` (its definition, workloads and baseline, loaded
    once; ``constraints`` are the round's, by default the task's). Calls are serialized, since the evaluator's
    runner keeps one warm worker."""

    def __init__(
        self,
        evaluator: Evaluator,
        task: KernelTask,
        config: EvalConfig | None = None,
        workloads: list[Workload] | None = None,
        constraints: Constraints | None = None,
        baseline: Solution | None = None,
    ) -> None:
        self.task = task
        self.constraints = constraints if constraints is not None else task.constraints
        self.definition: Definition = task.load_definition()
        self.workloads = workloads if workloads is not None else task.load_workloads()
        self.baseline = baseline if baseline is not None else task.baseline_solution(self.definition)
        """What candidates are timed against: the run's incumbent (its start kernel), else the task's baseline."""
        self.config = config or EvalConfig(**task.tolerance.model_dump())
        self._evaluator = evaluator
        self._lock = threading.Lock()

    def evaluate(self, solution: Solution, baseline: Solution | None = None) -> CandidateResult:
        with self._lock:
            return self._evaluator.evaluate(
                self.definition,
                self.workloads,
                solution,
                baseline if baseline is not None else self.baseline,
                self.config,
                self.task.blob_root(),
                constraints=self.constraints,
            )

    def check(self, solution: Solution, workloads: list[Workload]) -> CandidateResult:
        config = self.config.model_copy(update={"measure": False})
        with self._lock:
            return self._evaluator.evaluate(
                self.definition,
                workloads,
                solution,
                self.baseline,
                config,
                self.task.blob_root(),
                constraints=self.constraints,
            )


class FakeEvaluations:
    """Answers with ``respond(solution)``, or ``versus(solution, baseline)`` when a baseline is given; keeps
    the solutions it was asked about and the baselines."""

    def __init__(
        self,
        respond: Callable[[Solution], CandidateResult],
        versus: Callable[[Solution, Solution], CandidateResult] | None = None,
    ) -> None:
        self._respond = respond
        self._versus = versus
        self.calls: list[Solution] = []
        self.baselines: list[Solution | None] = []

    def evaluate(self, solution: Solution, baseline: Solution | None = None) -> CandidateResult:
        self.calls.append(solution)
        self.baselines.append(baseline)
        if baseline is not None and self._versus is not None:
            return self._versus(solution, baseline)
        return self._respond(solution)


def scripted_result(
    solution: str, speedups: Mapping[str, float], failed: Mapping[str, str] | None = None
) -> CandidateResult:
    """A made-up result for fakes: ``speedups`` by workload (baseline 1 ms), ``failed`` workloads with reasons
    (INCORRECT_NUMERICAL)."""
    results = []
    for uuid, speedup in speedups.items():
        base = TimingStats(median_ms=1.0, p20_ms=0.99, p80_ms=1.01, n=10, noise=0.005, warmup_calls=3)
        mine = base.model_copy(update={"median_ms": 1.0 / speedup, "p20_ms": 0.99 / speedup, "p80_ms": 1.01 / speedup})
        results.append(
            WorkloadResult(
                uuid=uuid, axes={}, status=EvaluationStatus.PASSED, timing=mine, baseline_timing=base, speedup=speedup
            )
        )
    for uuid, reason in (failed or {}).items():
        results.append(WorkloadResult(uuid=uuid, axes={}, status=EvaluationStatus.INCORRECT_NUMERICAL, reason=reason))
    return CandidateResult(
        status=overall_status([r.status for r in results]),
        solution=solution,
        baseline="reference",
        summary=summarize(results),
        traces=[],
        workloads=results,
        build=BuildResult(ok=True),
    )


class ScratchUnavailable(RuntimeError):
    """The evaluation service runs no scratch tests (a fake, a remote service)."""


class EvaluationCache:
    """Evaluates each distinct content once (``Solution.content_hash``); shared by the evaluate, profile and
    submit tools of a run, so submitting what was just evaluated costs nothing."""

    def __init__(self, service: EvaluationService) -> None:
        self._service = service
        self._lock = threading.Lock()
        self._results: dict[str, CandidateResult] = {}
        self._solutions: dict[str, Solution] = {}  # by name, each evaluated one
        self._versus: dict[tuple[str, str], CandidateResult] = {}

    def get(self, solution: Solution) -> CandidateResult | None:
        with self._lock:
            return self._results.get(solution.content_hash())

    def find(self, name: str) -> Solution | None:
        """The evaluated solution of that name (as an evaluation reports it), or None."""
        with self._lock:
            return self._solutions.get(name.strip())

    def versus(self, solution: Solution, parent: Solution) -> CandidateResult:
        """``solution`` timed against ``parent`` (paired, in one session), once per pair of contents."""
        key = (solution.content_hash(), parent.content_hash())
        with self._lock:
            cached = self._versus.get(key)
        if cached is not None:
            return cached
        result = self._service.evaluate(solution, parent)
        with self._lock:
            self._versus[key] = result
        return result

    def retime(self, solution: Solution) -> CandidateResult:
        """A fresh evaluation, whatever is cached (it replaces the cached one)."""
        result = self._service.evaluate(solution)
        with self._lock:
            self._results[solution.content_hash()] = result
            self._solutions[solution.name] = solution
        return result

    def scratch(self, solution: Solution, workloads: list[Workload]) -> CandidateResult:
        """Correctness only on made-up workloads, never cached. Raises ``ScratchUnavailable`` where the service
        cannot run them."""
        if not isinstance(self._service, ScratchService):
            raise ScratchUnavailable("scratch tests need the task's own evaluator, which this run does not have")
        return self._service.check(solution, workloads)

    def evaluate(self, solution: Solution) -> CandidateResult:
        cached = self.get(solution)
        if cached is not None:
            with self._lock:
                self._solutions.setdefault(solution.name, solution)
            return cached
        result = self._service.evaluate(solution)
        with self._lock:
            self._results[solution.content_hash()] = result
            self._solutions[solution.name] = solution
        return result


class EvaluateInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvaluateTool:
    name = "evaluate"
    description = (
        "Build the workspace's current kernel and evaluate it on every workload against the baseline: "
        "correctness first, then timing. Reports status, geomean speedup, faster/total, failing workloads "
        "with reasons, and the slowest workloads. Does not submit."
    )
    input_model = EvaluateInput

    def __init__(
        self, task: KernelTask, workspace: Workspace, definition: str, evaluations: EvaluationCache, author: Author
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.evaluations = evaluations
        self.author = author
        self._count = itertools.count(1)

    def run(self, args: EvaluateInput) -> ToolResult:
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition,
                name=f"{self.task.name}-{self.author.agent_id}-eval{next(self._count)}",
                author=self.author.role,
            )
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        return evaluate_to_result(self.evaluations, solution)


def evaluate_to_result(evaluations: EvaluationCache, solution: Solution) -> ToolResult:
    """Evaluates (or reuses the evaluation of the same content) and renders it; a broken task is an error."""
    try:
        result = evaluations.evaluate(solution)
    except BenchInputError as exc:
        return ToolResult(content=f"the task itself cannot be evaluated (not the kernel's fault): {exc}", is_error=True)
    data = render.summary_data(result, solution.content_hash())
    return ToolResult(content=render.result(result), data=data)


class MeteredEvaluate:
    """An agent's ``evaluate`` tool under its role's share of the run's evaluation budget: each call that
    evaluates takes one evaluation from the share (an error result, where nothing was evaluated, gives it back),
    and a call with none left is refused before anything is built (an error whose data says ``refused``)."""

    def __init__(self, tool: Tool, share: EvaluationShare) -> None:
        self.tool, self.share = tool, share
        self.name, self.description = tool.name, tool.description
        self.input_model: type[BaseModel] = tool.input_model

    def run(self, args: Any) -> ToolResult:
        if not self.share.take():
            return ToolResult(content=self.share.refusal(), is_error=True, data={"refused": "evaluation_budget"})
        result = self.tool.run(args)
        if result.is_error:  # nothing was evaluated (no kernel in the workspace, a broken task): not counted
            self.share.give_back()
        return result
