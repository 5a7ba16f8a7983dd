"""The ``assembly`` tool: the code the compiler generated for the workspace kernel, filtered: PTX and SASS for
CUDA, the assembly and g++'s vectorization report for C++ (``gpu_bench/build/listing.py``)."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import KernelTask, Listing, ListingView, Solution, listing
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.workspace import Workspace

Lister = Callable[[Solution, ListingView, str | None, str | None, int], Listing]


def default_lister(
    solution: Solution, view: ListingView, function: str | None, pattern: str | None, max_lines: int
) -> Listing:
    return listing(solution, view, function, pattern, max_lines)


class AssemblyInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    view: ListingView = Field(
        description="ptx or sass (CUDA: the PTX ptxas compiled, the SASS cuobjdump shows); asm or vectorization "
        "(C++: the assembly, and g++'s report of which loops it vectorized and why it did not vectorize others)"
    )
    function: str | None = Field(default=None, description="only this function or kernel (a part of its symbol)")
    pattern: str | None = Field(
        default=None, description="only lines matching this regular expression, e.g. 'ld.global|st.global' or 'ymm'"
    )
    max_lines: int = Field(default=200, ge=1, le=2000, description="at most this many lines are shown")
    path: str | None = Field(
        default=None, description="workspace file to build as the entry source; default the kernel's"
    )


class AssemblyTool:
    name = "assembly"
    description = (
        "Show the code the compiler generated for the workspace kernel: PTX or SASS (CUDA), assembly or the "
        "vectorization report (C++), filtered to one function and to lines matching a pattern. Use it to check "
        "that a change compiled to what you meant (vector widths, loads, tensor-core instructions, spills)."
    )
    input_model = AssemblyInput

    def __init__(
        self, task: KernelTask, workspace: Workspace, definition: str, author: Author, lister: Lister = default_lister
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.author = author
        self.lister = lister

    def run(self, args: AssemblyInput) -> ToolResult:
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition,
                name=f"{self.task.name}-{self.author.agent_id}-listing",
                author=self.author.role,
                entry_file=args.path,
            )
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        found = self.lister(solution, args.view, args.function, args.pattern, args.max_lines)
        data = {"view": found.view, "lines": found.lines, "functions": found.functions[:50]}
        if found.problem is not None:
            return ToolResult(content=found.problem, is_error=True, data=data)
        head = f"{args.view} of {', '.join(found.functions[:8]) or 'the kernel'}: {found.lines} line(s)"
        return ToolResult(content=f"{head}\n{found.text}" if found.text else f"{head}; none match", data=data)
