"""The ``sanitize`` tool: compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over the workspace's CUDA
kernel on one workload (``gpu_bench/profile/sanitizer.py``), behind a ``Sanitizer`` callable: the real one builds
the kernel and runs the tool on this machine's GPU; a fake answers in tests."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import (
    BenchInputError,
    Definition,
    KernelTask,
    Language,
    LocalSanitizerHost,
    ProfileRequest,
    ProfileUnavailable,
    SanitizerReport,
    SanitizerTool,
    Solution,
    Workload,
    build,
    render_sanitizer,
    require_sanitizer,
    sanitize_workload,
)
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.workspace import Workspace

Sanitizer = Callable[[KernelTask, Definition, Solution, Workload, SanitizerTool], SanitizerReport]
"""Runs the tool; raises ``ProfileUnavailable`` where it cannot (no compute-sanitizer, no GPU) and
``BenchInputError`` when the kernel does not build."""


def local_sanitizer(
    task: KernelTask, definition: Definition, solution: Solution, workload: Workload, tool: SanitizerTool
) -> SanitizerReport:
    host = LocalSanitizerHost()
    require_sanitizer(host)  # says what is missing before anything is built
    built = build(solution)
    if not built.ok or built.artifact is None:
        raise BenchInputError("the kernel does not build: use compile to see why")
    return sanitize_workload(host, _request(solution, built.artifact, definition, workload, task), tool)


def _request(
    solution: Solution, artifact: str, definition: Definition, workload: Workload, task: KernelTask
) -> ProfileRequest:
    return ProfileRequest(
        solution=solution, artifact=artifact, definition=definition, workload=workload, blob_root=str(task.blob_root())
    )


class SanitizeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: SanitizerTool = Field(
        default="memcheck",
        description="memcheck: out-of-bounds and misaligned accesses; racecheck: shared-memory races; synccheck: "
        "barrier misuse; initcheck: reads of uninitialized global memory",
    )
    workload: str | None = Field(default=None, description="a workload's uuid; default the smallest workload")


class SanitizeTool:
    name = "sanitize"
    description = (
        "Run NVIDIA compute-sanitizer on the workspace's CUDA kernel for one workload: memory errors, shared-"
        "memory races, barrier misuse or uninitialized reads, each with the kernel, file and line. Slow; use it "
        "on a small workload when a result is wrong only sometimes or a kernel crashes."
    )
    input_model = SanitizeInput

    def __init__(
        self,
        task: KernelTask,
        workspace: Workspace,
        definition: Definition,
        author: Author,
        sanitizer: Sanitizer = local_sanitizer,
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.author = author
        self.sanitizer = sanitizer

    def run(self, args: SanitizeInput) -> ToolResult:
        if self.task.language != Language.CUDA:
            return ToolResult(content="sanitize checks CUDA kernels; this kernel is not CUDA", is_error=True)
        try:
            workloads = self.task.load_workloads()
        except (OSError, ValueError) as exc:
            return ToolResult(content=f"the task's workloads cannot be read: {exc}", is_error=True)
        chosen = self._workload(workloads, args.workload)
        if isinstance(chosen, str):
            return ToolResult(content=chosen, is_error=True)
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition.name,
                name=f"{self.task.name}-{self.author.agent_id}-sanitize",
                author=self.author.role,
            )
            report = self.sanitizer(self.task, self.definition, solution, chosen, args.tool)
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        except (ProfileUnavailable, BenchInputError) as exc:
            return ToolResult(content=str(exc), is_error=True)
        data = {"tool": report.tool, "workload": report.workload, "errors": report.errors, "error": report.error}
        return ToolResult(content=render_sanitizer(report), data=data, is_error=report.error is not None)

    def _workload(self, workloads: list[Workload], wanted: str | None) -> Workload | str:
        if not workloads:
            return "the task has no workloads"
        if wanted is None:
            return min(workloads, key=lambda w: sum(w.axes.values()))
        for workload in workloads:
            if workload.uuid == wanted:
                return workload
        return f"no workload {wanted!r}; workloads: {', '.join(w.uuid for w in workloads[:10])}"
