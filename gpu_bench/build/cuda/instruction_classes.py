"""Instruction classes of generated CUDA code, read from PTX (and SASS where there is one): which generation
of tensor-core instructions a kernel uses and which asynchronous copies, with comments, file tables and names
ignored, so a design is known by what the compiler emitted and not by what the source mentions.

``downgrades`` compares a candidate with the kernel it should not fall behind (the best): a lower tensor-core
generation (``wgmma → mma.sync``, ``mma.sync → no tensor-core instructions``) or an asynchronous-copy class
lost (TMA, cp.async). Nothing here runs a tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class InstructionClass:
    name: str
    ptx: str
    """A regular expression over PTX instructions."""
    sass: str
    """A regular expression over SASS instructions."""
    tensor_generation: int = 0
    """Tensor-core MMA generation: 1 mma.sync and WMMA (Volta to Ada), 2 wgmma (Hopper), 3 tcgen05
    (Blackwell); 0 for classes that are not tensor-core MMAs."""
    asynchronous_copy: bool = False


_START = r"(?<![\w.])"
"""An instruction starts at a line's start, after a predicate or a label, never inside another name."""

CLASSES = (
    InstructionClass("tcgen05", _START + r"tcgen05\.mma", r"\bUTC[A-Z]*MMA\b", tensor_generation=3),
    InstructionClass("wgmma", _START + r"wgmma\.mma_async", r"\b[HQIB]GMMA\b", tensor_generation=2),
    InstructionClass("wmma", _START + r"wmma\.mma", r"(?!)", tensor_generation=1),  # in SASS: HMMA, as mma.sync
    InstructionClass("mma.sync", _START + r"mma\.sync", r"\b[HIDB]MMA\b", tensor_generation=1),
    InstructionClass(
        "TMA",
        _START + r"cp\.async\.bulk\.tensor",
        r"\bUTMA(LDG|STG|PF)\b",
        asynchronous_copy=True,
    ),
    InstructionClass(
        "cp.async.bulk",
        _START + r"cp\.async\.bulk(?!\.tensor)(?![\w.]*(commit|wait))",
        r"\bUBLKCP\b",
        asynchronous_copy=True,
    ),
    InstructionClass("cp.async", _START + r"cp\.async\.c[ag]\b", r"\bLDGSTS\b", asynchronous_copy=True),
    InstructionClass("ldmatrix", _START + r"ldmatrix", r"\bLDSM\b"),
    InstructionClass("stmatrix", _START + r"stmatrix", r"\bSTSM\b"),
    InstructionClass("mbarrier", _START + r"mbarrier\.", r"\bSYNCS\b"),
)
BY_NAME = {c.name: c for c in CLASSES}


def instruction_classes(ptx: str, sass: str = "") -> list[str]:
    """The classes whose instructions appear in the code, in ``CLASSES`` order."""
    ptx_code, sass_code = code_lines(ptx), code_lines(sass)
    return [c.name for c in CLASSES if appears(c, ptx_code, sass_code)]


def appears(c: InstructionClass, ptx_code: str, sass_code: str) -> bool:
    """Whether the class's instructions are in the code (``code_lines`` of PTX and SASS)."""
    return bool(re.search(c.ptx, ptx_code, re.MULTILINE) or (sass_code and re.search(c.sass, sass_code, re.MULTILINE)))


def code_lines(text: str) -> str:
    """The text without comments, file tables and function headers, so an instruction counts only when it is
    code (not in a comment, a file name or a kernel's name)."""
    lines = []
    for line in re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL).splitlines():
        stripped = line.split("//", 1)[0].strip()
        if not stripped or stripped.startswith((".file", ".loc", "Function :", ".entry", ".visible", ".func")):
            continue
        lines.append(stripped)
    return "\n".join(lines)


def tensor_generation(classes: list[str]) -> tuple[int, str]:
    """The highest tensor-core generation among ``classes`` and its name (0 and ``no tensor-core
    instructions`` when there is none)."""
    found = [BY_NAME[n] for n in classes if n in BY_NAME and BY_NAME[n].tensor_generation]
    if not found:
        return 0, "no tensor-core instructions"
    top = max(found, key=lambda c: c.tensor_generation)
    return top.tensor_generation, top.name


def downgrades(reference: list[str], candidate: list[str]) -> list[str]:
    """How ``candidate`` falls behind ``reference`` (both instruction-class lists): ``wgmma → mma.sync`` for a
    lower tensor-core generation, ``TMA lost`` for an asynchronous-copy class that disappeared."""
    found: list[str] = []
    before, before_name = tensor_generation(reference)
    after, after_name = tensor_generation(candidate)
    if after < before:
        found.append(f"{before_name} → {after_name}")
    found += [f"{name} lost" for name in reference if BY_NAME[name].asynchronous_copy and name not in candidate]
    return found


def lost_classes(reference: list[str], candidate: list[str]) -> list[str]:
    """The classes behind ``downgrades``: the reference's tensor-core class when the candidate's generation is
    lower, and each asynchronous-copy class it lost."""
    lost: list[str] = []
    before, before_name = tensor_generation(reference)
    if tensor_generation(candidate)[0] < before:
        lost.append(before_name)
    return lost + [n for n in reference if BY_NAME[n].asynchronous_copy and n not in candidate]


def checkable(pattern: str) -> str | None:
    """Why a ``require``/``forbid`` pattern could never be told apart in PTX or SASS (a source-level name such
    as ``cuda::pipeline`` or ``__pipeline_memcpy_async``, which compile to other instructions), or None when
    it is an instruction class or a PTX or SASS instruction the checker can see."""
    if pattern in BY_NAME:
        return None
    classes = ", ".join(c.name for c in CLASSES)
    if re.search(r"::|\(|\s|^_", pattern):
        return f"{pattern!r} is a source-level name: it never appears in PTX or SASS (instruction classes: {classes})"
    if not re.fullmatch(r"[A-Za-z][\w.]*", pattern):
        return f"{pattern!r} is not a PTX or SASS instruction (instruction classes: {classes})"
    return None
