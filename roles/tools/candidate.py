"""A workspace's kernel files as a ``Solution`` (like ``KernelTask.source_solution``, read from the workspace),
seeding a workspace from a task, and the ``submit_candidate`` tool."""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evoteam.gpu_bench.api import KernelTask, Solution, SourceFile
from evoteam.roles.workspace import Workspace, WorkspaceError


class CandidateError(ValueError):
    """A kernel file is missing or unreadable in the workspace; the message is shown to the model."""


def kernel_files(task: KernelTask) -> list[str]:
    """The workspace paths of the task's files: the entry source first, then the extra sources."""
    return [task.source.name, *(p.name for p in task.extra_sources)]


def seed_workspace(task: KernelTask, root: Path) -> Workspace:
    """A workspace at ``root`` holding a copy of the task's kernel files (as they are in the repository)."""
    root.mkdir(parents=True, exist_ok=True)
    for path, name in zip([task.source, *task.extra_sources], kernel_files(task), strict=True):
        shutil.copyfile(path, root / name)
    return Workspace(root)


def workspace_solution(
    task: KernelTask,
    workspace: Workspace,
    definition: str,
    name: str,
    author: str,
    description: str = "",
    entry_file: str | None = None,
) -> Solution:
    """The workspace's kernel files as a solution; ``entry_file`` (a workspace path) replaces the task's entry
    source, to build a variant the agent wrote beside it."""
    entry = entry_file or task.source.name
    paths = [entry, *(p for p in kernel_files(task)[1:] if p != entry)]
    sources = []
    for relative in paths:
        try:
            sources.append(SourceFile(path=relative, content=workspace.resolve(relative).read_text(encoding="utf-8")))
        except WorkspaceError as exc:
            raise CandidateError(str(exc)) from None
        except FileNotFoundError:
            raise CandidateError(f"the kernel file {relative!r} is not in the workspace") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CandidateError(f"cannot read the kernel file {relative!r}: {exc}") from None
    spec = task.build_spec(entry)
    return Solution(
        name=name, definition=definition, author=author, spec=spec, sources=sources, description=description
    )


class SubmitInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rationale: str = Field(
        min_length=1, max_length=400, description="one line: what this candidate changes and why it should be faster"
    )

    @field_validator("rationale")
    @classmethod
    def _one_line(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the rationale is empty")
        if "\n" in value:
            raise ValueError("the rationale must be one line")
        return value
