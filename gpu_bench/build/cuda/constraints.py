"""Constraints on generated code, checked on PTX and SASS text and on ptxas resource facts.

``require``/``forbid`` are instruction classes (``wgmma``, ``TMA``: ``instruction_classes.py``) or substrings of
instructions (``wgmma.mma_async``, ``wmma.mma``, ``HGMMA``);
a violated constraint turns a candidate into ``REJECTED`` with the reason. Nothing here runs a tool.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.build.cuda.instruction_classes import BY_NAME, appears, code_lines
from evoteam.gpu_bench.schema import KernelResources


class Constraints(BaseModel):
    model_config = ConfigDict(extra="forbid")
    require: list[str] = Field(default_factory=list)
    """Each must appear in the PTX or the SASS (an instruction or a prefix of one)."""
    forbid: list[str] = Field(default_factory=list)
    """None may appear in the PTX or the SASS."""
    max_registers: int | None = Field(default=None, gt=0)
    """Per thread, for every kernel."""
    no_spills: bool = False

    def is_empty(self) -> bool:
        return not (self.require or self.forbid or self.max_registers is not None or self.no_spills)

    def needs_code(self) -> bool:
        return bool(self.require or self.forbid)


def check(constraints: Constraints, ptx: str, sass: str, resources: list[KernelResources]) -> list[str]:
    """The violated constraints, each as one sentence; empty when all hold."""
    ptx_code, sass_code = code_lines(ptx), code_lines(sass)
    violations = []
    for pattern in constraints.require:
        if not found(pattern, ptx_code, sass_code):
            violations.append(f"required instruction {pattern!r} does not appear in the generated PTX/SASS")
    for pattern in constraints.forbid:
        if found(pattern, ptx_code, sass_code):
            violations.append(f"forbidden instruction {pattern!r} appears in the generated PTX/SASS")
    for kernel in resources:
        if constraints.max_registers is not None and kernel.registers > constraints.max_registers:
            violations.append(
                f"kernel {kernel.name} uses {kernel.registers} registers, more than the limit of "
                f"{constraints.max_registers}"
            )
        if constraints.no_spills and (kernel.spill_stores or kernel.spill_loads):
            violations.append(
                f"kernel {kernel.name} spills ({kernel.spill_stores} bytes stored, {kernel.spill_loads} bytes "
                "loaded) but spills are forbidden"
            )
    return violations


def found(pattern: str, ptx_code: str, sass_code: str) -> bool:
    """An instruction class (``wgmma``, ``TMA``: ``instruction_classes.CLASSES``) by its instructions, anything
    else as a substring of an instruction."""
    known = BY_NAME.get(pattern)
    if known is not None:
        return appears(known, ptx_code, sass_code)
    return pattern in ptx_code or pattern in sass_code
