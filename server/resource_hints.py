"""ptxas resources as inlay hints: after the name of each ``__global__`` function of a CUDA file, what its last
compile used (registers, spills, shared memory), from ``-Xptxas -v``.

ptxas names kernels by their symbol (mangled for C++, one per template instantiation); ``c++filt`` spells them
out before they get here (``KernelFacts.spelled``), and a kernel is matched to its declaration by its unqualified
name. Pure functions of the text and the facts: no compiler, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types as lsp

from evoteam.gpu_bench.api import KernelResources

MAX_SHOWN = 3
"""Instantiations named in one label; the tooltip lists every one."""
_GLOBAL = re.compile(r"\b__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_NAME_BEFORE = re.compile(r"(~?\w+)\s*(?:<[^<>;{}]*>)?\s*$")


@dataclass(frozen=True)
class KernelFacts:
    spelled: str
    """The kernel as C++ spells it (``void scale<4>(float*, int)``, ``add``)."""
    resources: KernelResources


@dataclass(frozen=True)
class KernelName:
    name: str
    line: int
    """0-based."""
    end: int
    """The UTF-16 character just after the name."""
    defined: bool
    """A definition (a body follows), not a declaration or an explicit instantiation."""


def kernel_names(text: str) -> list[KernelName]:
    """The ``__global__`` functions declared or defined in ``text`` (comments are not parsed: a ``__global__``
    in a comment followed by a call-like token may count)."""
    found = []
    for match in _GLOBAL.finditer(text):
        rest = text[match.end() : match.end() + 600]
        rest = _LAUNCH_BOUNDS.sub(lambda m: " " * len(m.group(0)), rest)
        cut = re.search(r"[(;{}]", rest)
        if cut is None or cut.group(0) != "(":
            continue
        name = _NAME_BEFORE.search(rest[: cut.start()])
        if name is None:
            continue
        at = match.end() + name.start(1)
        line = text.count("\n", 0, at)
        start = text.rfind("\n", 0, at) + 1
        end = utf16_length(text[start:at]) + utf16_length(name.group(1))
        body = re.compile(r"[;{]").search(text, match.end() + cut.end() + _closing(text[match.end() + cut.end() :]))
        found.append(KernelName(name.group(1), line, end, body is not None and body.group(0) == "{"))
    return found


def _closing(text: str) -> int:
    """Where the parameter list that ``text`` continues (after its ``(``) ends."""
    depth = 1
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return i + 1
    return len(text)


def base_name(spelled: str) -> str:
    """``ns::scale`` of ``void ns::scale<4>(float*, int)``, without the namespace: ``scale``."""
    depth = 0
    head = spelled
    for i, char in enumerate(spelled):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(depth - 1, 0)
        elif char == "(" and depth == 0:
            head = spelled[:i]
            break
    head = head.rstrip()
    while head.endswith(">"):  # template arguments, balanced
        depth, i = 0, len(head) - 1
        while i >= 0:
            depth += {">": 1, "<": -1}.get(head[i], 0)
            if depth == 0:
                break
            i -= 1
        head = head[:i].rstrip()
    return re.split(r"[\s:*&]+", head)[-1] if head else spelled


def label(resources: KernelResources) -> str:
    """``32 regs · 4 KiB smem · 24 B spilled`` (shared memory and spills only when there are any)."""
    parts = [f"{resources.registers} regs"]
    if resources.shared_bytes:
        parts.append(f"{_bytes(resources.shared_bytes)} smem")
    spilled = resources.spill_stores + resources.spill_loads
    if spilled:
        parts.append(f"{_bytes(resources.spill_stores)} spill stores, {_bytes(resources.spill_loads)} loads")
    return " · ".join(parts)


def details(fact: KernelFacts) -> str:
    r = fact.resources
    return (
        f"{fact.spelled} ({r.arch}): {r.registers} registers, {r.shared_bytes} B static shared memory, "
        f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads, {r.stack_bytes} B stack, "
        f"{r.constant_bytes} B constant, {r.barriers} barriers"
    )


def hints(text: str, facts: list[KernelFacts], within: lsp.Range | None = None) -> list[lsp.InlayHint]:
    """One hint after each ``__global__`` name that ptxas reported on (in ``within`` when given)."""
    by_name: dict[str, list[KernelFacts]] = {}
    for fact in facts:
        by_name.setdefault(base_name(fact.spelled), []).append(fact)
    out = []
    kernels = kernel_names(text)
    defined = {k.name for k in kernels if k.defined}
    for kernel in kernels:
        mine = by_name.get(kernel.name)
        if kernel.name in defined and not kernel.defined:  # the definition gets it, not a declaration
            continue
        if not mine or (within is not None and not _inside((kernel.line, kernel.end), within)):
            continue
        if len(mine) == 1:
            shown = f"ptxas: {label(mine[0].resources)}"
        else:
            each = [f"{_instance(f.spelled)}: {label(f.resources)}" for f in mine[:MAX_SHOWN]]
            more = f"; +{len(mine) - MAX_SHOWN} more" if len(mine) > MAX_SHOWN else ""
            shown = "ptxas: " + "; ".join(each) + more
        tooltip = "\n".join(details(f) for f in mine)
        out.append(
            lsp.InlayHint(
                position=lsp.Position(kernel.line, kernel.end), label=shown, padding_left=True, tooltip=tooltip
            )
        )
    return out


def _instance(spelled: str) -> str:
    """``scale<4>`` of ``void scale<4>(float*, int)``."""
    name = base_name(spelled)
    at = spelled.find(name + "<")
    if at < 0:
        return name
    depth = 0
    for i in range(at + len(name), len(spelled)):
        depth += {"<": 1, ">": -1}.get(spelled[i], 0)
        if depth == 0:
            return spelled[at : i + 1]
    return name


def _inside(at: tuple[int, int], where: lsp.Range) -> bool:
    return (where.start.line, where.start.character) <= at <= (where.end.line, where.end.character)


def _bytes(count: int) -> str:
    if count >= 1024 and count % 1024 == 0:
        return f"{count // 1024} KiB"
    if count >= 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count} B"


def utf16_length(text: str) -> int:
    """``text``'s length in UTF-16 code units: the unit of an LSP position's character."""
    return len(text.encode("utf-16-le")) // 2
