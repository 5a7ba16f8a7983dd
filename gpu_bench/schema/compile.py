"""Compile-only facts about a candidate: structured compiler diagnostics and per-kernel resource usage.

These travel to users (``evoteam check``, ``evoteam bench``), to agents (the compile tool) and to the
language server, so they are plain models with no behaviour.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from evoteam.gpu_bench.schema._base import Model


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"
    """Remarks and informational messages."""


class Related(Model):
    """A place that explains a diagnostic (a template instantiation, a previous declaration)."""

    file: str
    line: int
    """1-based; 0 when the tool gave no line."""
    column: int = 0
    """1-based; 0 when the tool gave no column."""
    message: str


class Diagnostic(Model):
    file: str
    """As the compiler printed it, relative to the build folder when it was inside it."""
    line: int
    """1-based; 0 when the tool gave no line (e.g. a link error)."""
    column: int = 0
    """1-based; 0 when unknown (nvcc prints a caret line from which the column is read)."""
    end_column: int = 0
    """1-based, exclusive; 0 when unknown."""
    severity: Severity
    code: str | None = None
    """``177-D`` for ``warning #177-D``, ``-Wunused-variable`` for gcc, None when the tool gave none."""
    message: str
    tool: str
    """Which stage spoke: ``nvcc`` (front end), ``host`` (gcc/g++), ``ptxas``, ``nvlink`` or ``gcc``."""
    related: list[Related] = Field(default_factory=list)


class KernelResources(Model):
    """What ptxas reports for one kernel with ``-Xptxas -v`` (or ``--resource-usage``)."""

    name: str
    """The symbol as ptxas printed it (mangled for C++ kernels)."""
    arch: str
    registers: int = 0
    spill_stores: int = 0
    """Bytes."""
    spill_loads: int = 0
    """Bytes."""
    shared_bytes: int = 0
    """Static shared memory."""
    stack_bytes: int = 0
    constant_bytes: int = 0
    """Kernel-parameter and user constant banks together."""
    barriers: int = 0
