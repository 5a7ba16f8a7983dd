"""The run's history for an agent: ``history`` (every candidate so far, with its parent and its speedup over
the start) and ``diff`` (the kernel files of two versions: the start, a candidate, or the workspace).

The history itself is behind ``CandidateHistory`` (the supervisor gives the run's; ``NoHistory`` outside a
run), so the tools know nothing of journals.
"""

from __future__ import annotations

import difflib
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.tools.base import ToolResult
from evoteam.roles.tools.candidate import kernel_files
from evoteam.roles.workspace import Workspace, WorkspaceError

MAX_DIFF_LINES = 400
WORKSPACE = "workspace"
START = "start"


class HistoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    round: int
    role: str
    parent: str | None = None
    status: str | None = None
    """Its evaluation's status; None until it is evaluated."""
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    best: bool = False
    vetoed: bool = False
    rationale: str = ""

    def line(self) -> str:
        speed = "not evaluated" if self.status is None else self.status
        if self.speedup is not None:
            speed += f" {self.speedup:.3f}x" + (f" [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci else "")
        marks = "".join((" ★ best" if self.best else "", " (vetoed)" if self.vetoed else ""))
        parent = f" from {self.parent}" if self.parent else ""
        return f"- {self.id}: round {self.round}, {self.role}{parent}: {speed}{marks}. {self.rationale[:160]}"


class CandidateHistory(Protocol):
    def entries(self) -> list[HistoryEntry]:
        """Every candidate of the run so far, oldest first."""
        ...

    def files(self, version: str) -> dict[str, str] | None:
        """The kernel files of ``start`` or of a candidate (by id), None for an unknown one."""
        ...


class NoHistory:
    """Outside a run: no candidates, no start."""

    def entries(self) -> list[HistoryEntry]:
        return []

    def files(self, version: str) -> dict[str, str] | None:
        return None


class HistoryInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round: int | None = Field(default=None, description="only this round's candidates; default every round")


class HistoryTool:
    name = "history"
    description = (
        "The run's candidates so far, oldest first: id, round, role, the candidate it was made from, its status "
        "and speedup over the start kernel with the 95% interval, the best marked, and its rationale. Use the "
        "ids with diff."
    )
    input_model = HistoryInput

    def __init__(self, history: CandidateHistory) -> None:
        self.history = history

    def run(self, args: HistoryInput) -> ToolResult:
        entries = [e for e in self.history.entries() if args.round is None or e.round == args.round]
        if not entries:
            scope = f"in round {args.round}" if args.round is not None else "in this run yet"
            return ToolResult(content=f"no candidates {scope}", data={"candidates": 0})
        return ToolResult(
            content="\n".join(e.line() for e in entries),
            data={"candidates": len(entries), "best": next((e.id for e in entries if e.best), None)},
        )


class DiffInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: str = Field(
        default=START, description="'start' (the kernel the run started from), a candidate id, or 'workspace'"
    )
    b: str = Field(default=WORKSPACE, description="the same choices; default your workspace as it is now")


class DiffTool:
    name = "diff"
    description = (
        "A unified diff of the kernel files between two versions: 'start' (the kernel the run started from), a "
        "candidate id (see history), or 'workspace' (yours, as it is now). Default: start against workspace."
    )
    input_model = DiffInput

    def __init__(self, task: KernelTask, workspace: Workspace, history: CandidateHistory) -> None:
        self.task, self.workspace, self.history = task, workspace, history

    def run(self, args: DiffInput) -> ToolResult:
        versions = {}
        for which in (args.a, args.b):
            files = self._files(which.strip())
            if files is None:
                known = ", ".join(e.id for e in self.history.entries()[-5:]) or "none yet"
                return ToolResult(
                    content=f"unknown version {which!r}: give 'start', 'workspace' or a candidate id (latest: {known})",
                    is_error=True,
                )
            versions[which] = files
        old, new = versions[args.a], versions[args.b]
        lines: list[str] = []
        for path in sorted(set(old) | set(new)):
            lines += difflib.unified_diff(
                old.get(path, "").splitlines(),
                new.get(path, "").splitlines(),
                f"{args.a}/{path}",
                f"{args.b}/{path}",
                lineterm="",
            )
        if not lines:
            return ToolResult(content=f"{args.a} and {args.b}: the kernel files are the same", data={"lines": 0})
        shown = lines[:MAX_DIFF_LINES]
        if len(lines) > MAX_DIFF_LINES:
            shown.append(f"... {len(lines) - MAX_DIFF_LINES} more lines (diff fewer versions apart, or view the files)")
        return ToolResult(content="\n".join(shown), data={"lines": len(lines)})

    def _files(self, version: str) -> dict[str, str] | None:
        if version != WORKSPACE:
            return self.history.files(version)
        files = {}
        for path in kernel_files(self.task):
            try:
                files[path] = self.workspace.resolve(path).read_text(encoding="utf-8")
            except (WorkspaceError, OSError):
                continue
        return files
