"""The ``test`` tool: a scratch correctness test of the workspace kernel on inputs the agent picks (sizes by
axis, and per input zeros, ones, NaN, infinities, extremes or random values with specials sprinkled in), against
the task's reference, with the task's tolerance; nothing is timed and nothing is recorded as an evaluation."""

from __future__ import annotations

import itertools

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import (
    BenchInputError,
    Definition,
    EvaluationStatus,
    Fill,
    FillInput,
    KernelTask,
    RandomInput,
    Workload,
)
from evoteam.roles.tools import render
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.tools.evaluation import EvaluationCache, ScratchUnavailable
from evoteam.roles.workspace import Workspace

MAX_CASES = 8


class ScratchCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    axes: dict[str, int] = Field(
        default_factory=dict,
        description="a value for each variable axis of the definition (default: the first workload's)",
    )
    fill: dict[str, Fill | None] = Field(
        default_factory=dict,
        description="per input name: zeros, ones, nan, inf, -inf, large, tiny or specials (random with NaN, "
        "infinities and signed zeros sprinkled in); inputs not named are random",
    )


class TestInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cases: list[ScratchCase] = Field(min_length=1, max_length=MAX_CASES, description="the cases to run, each once")
    path: str | None = Field(
        default=None, description="workspace file to test as the entry source; default the kernel's"
    )


class ScratchTestTool:
    name = "test"
    description = (
        "Run the workspace kernel on inputs you choose (sizes by axis; per input zeros, ones, nan, inf, -inf, "
        "large, tiny or specials) and compare it with the reference within the task's tolerance. Correctness "
        "only: nothing is timed, nothing counts as an evaluation. Use it for edge cases the workloads miss."
    )
    input_model = TestInput

    def __init__(
        self,
        task: KernelTask,
        workspace: Workspace,
        definition: Definition,
        evaluations: EvaluationCache,
        author: Author,
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.evaluations = evaluations
        self.author = author
        self._count = itertools.count(1)

    def run(self, args: TestInput) -> ToolResult:
        variable = set(self.definition.var_axes())
        defaults = self._default_axes() if any(set(c.axes) != variable for c in args.cases) else {}
        workloads = []
        for i, case in enumerate(args.cases, 1):
            unknown = set(case.axes) - variable
            if unknown:
                return ToolResult(
                    content=f"case {i}: {sorted(unknown)} are not variable axes of {self.definition.name} "
                    f"(its variable axes: {sorted(variable)})",
                    is_error=True,
                )
            inputs = set(case.fill) - set(self.definition.inputs)
            if inputs:
                return ToolResult(
                    content=f"case {i}: {sorted(inputs)} are not inputs (inputs: {list(self.definition.inputs)})",
                    is_error=True,
                )
            axes = {**{k: v for k, v in defaults.items() if k in variable}, **case.axes}
            fills = {n: FillInput(value=f) if f is not None else RandomInput() for n, f in case.fill.items()}
            label = ", ".join(f"{k}={v}" for k, v in axes.items())
            filled = ", ".join(f"{n}={f}" for n, f in case.fill.items() if f is not None)
            workloads.append(
                Workload(uuid=f"test-{i} ({'; '.join(p for p in (label, filled) if p)})", axes=axes, inputs=fills)
            )
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition.name,
                name=f"{self.task.name}-{self.author.agent_id}-test{next(self._count)}",
                author=self.author.role,
                entry_file=args.path,
            )
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        try:
            result = self.evaluations.scratch(solution, workloads)
        except ScratchUnavailable as exc:
            return ToolResult(content=str(exc), is_error=True)
        except BenchInputError as exc:
            return ToolResult(content=f"the cases cannot be run: {exc}", is_error=True)
        if result.status == EvaluationStatus.COMPILE_ERROR:
            return ToolResult(content=render.result(result), data={"status": result.status.value})
        lines = [
            f"{sum(w.status == EvaluationStatus.PASSED for w in result.workloads)}/{len(workloads)} case(s) passed"
        ]
        for w in result.workloads:
            reason = f": {' '.join(w.reason.split())[:300]}" if w.reason and w.status != EvaluationStatus.PASSED else ""
            lines.append(f"  - {w.uuid}: {w.status.value}{reason}")
        data = {"status": result.status.value, "cases": {w.uuid: w.status.value for w in result.workloads}}
        return ToolResult(content="\n".join(lines), data=data)

    def _default_axes(self) -> dict[str, int]:
        """The first workload's axes (the sizes a case does not set)."""
        try:
            workloads = self.task.load_workloads()
        except (OSError, ValueError):
            return {}
        return dict(workloads[0].axes) if workloads else {}
