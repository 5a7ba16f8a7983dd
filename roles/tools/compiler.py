"""The ``compile`` tool: compile-only facts (diagnostics, per-kernel resources, constraint violations) through a
``Checker`` — by default ``evoteam.gpu_bench.build.check.check_solution`` — rendered compactly for the model."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import CheckResult, Constraints, KernelTask, Severity, Solution, check_solution
from evoteam.roles.tools import render
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.workspace import Workspace

Checker = Callable[[Solution, Constraints | None], CheckResult]
"""Builds ``solution`` for the architecture its spec targets and checks ``constraints`` on the result."""


def default_checker(solution: Solution, constraints: Constraints | None) -> CheckResult:
    return check_solution(solution, constraints)


class FakeChecker:
    """Answers every check with ``result``; keeps what it was asked."""

    def __init__(self, result: CheckResult) -> None:
        self.result = result
        self.calls: list[tuple[Solution, Constraints | None]] = []

    def __call__(self, solution: Solution, constraints: Constraints | None) -> CheckResult:
        self.calls.append((solution, constraints))
        return self.result


def render_outcome(outcome: CheckResult) -> str:
    errors = sum(1 for d in outcome.diagnostics if d.severity == Severity.ERROR)
    warnings = sum(1 for d in outcome.diagnostics if d.severity == Severity.WARNING)
    head = "compiled" if outcome.ok else "FAILED"
    lines = [f"{head} in {outcome.seconds:.1f} s: {errors} error(s), {warnings} warning(s)"]
    if outcome.diagnostics:
        lines.append(render.diagnostics(outcome.diagnostics))
    elif not outcome.ok and outcome.log.strip():
        lines += ["log (tail):", render.log_tail(outcome.log)]
    if outcome.resources:
        lines += ["resources:", render.resources(outcome.resources)]
    if outcome.violations:
        lines += ["constraint violations (the candidate would be REJECTED):"]
        lines += [f"  - {v}" for v in outcome.violations]
    lines += [f"note: {n}" for n in outcome.notes]
    return "\n".join(lines)


class CompileInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(
        default=None, description="workspace file to compile as the entry source; default the kernel's entry file"
    )


class CompileTool:
    name = "compile"
    description = (
        "Compile a kernel file without running it: compiler diagnostics with file:line:col, per-kernel "
        "resources (registers, spills, shared memory) and violations of the active constraints."
    )
    input_model = CompileInput

    def __init__(
        self,
        task: KernelTask,
        workspace: Workspace,
        definition: str,
        author: Author,
        checker: Checker = default_checker,
        constraints: Constraints | None = None,
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.author = author
        self.checker = checker
        self.constraints = constraints if constraints is not None else task.constraints

    def run(self, args: CompileInput) -> ToolResult:
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition,
                name=f"{self.task.name}-{self.author.agent_id}-check",
                author=self.author.role,
                entry_file=args.path,
            )
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        outcome = self.checker(solution, self.constraints)
        # A failed compile is a result the model reads, not a failed tool call.
        return ToolResult(content=render_outcome(outcome), data=outcome.model_dump(mode="json"))
