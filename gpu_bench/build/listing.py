"""Listings of generated code, for kernel engineers and agents: the PTX and SASS of a CUDA build, the assembly of a
C++ build and g++'s vectorization report (which loops it vectorized, and why not the others), filtered to one
function or to lines that match a pattern.

CUDA listings come from the build (through the build cache: the PTX ptxas saw, the SASS from cuobjdump); C++
listings from compiling the sources once more with ``-S`` and the build's flags, confined like every build.
Imports no torch.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from evoteam.gpu_bench.build.builder import BUILD_TIMEOUT_S, DEFAULT_CXX_FLAGS, build, cxx_compiler
from evoteam.gpu_bench.build.cuda import nvcc
from evoteam.gpu_bench.sandbox.run import run_confined
from evoteam.gpu_bench.schema import Language, Solution

View = Literal["ptx", "sass", "asm", "vectorization"]
VIEWS: dict[Language, tuple[View, ...]] = {
    Language.CUDA: ("ptx", "sass"),
    Language.CPP: ("asm", "vectorization"),
}
_CXX = (".cpp", ".cc", ".cxx", ".c")
_ASM_NOISE = re.compile(
    r"^\s*\.(cfi_\w+|loc|file|ident|section|p2align|align|type|size|globl|weak|text|LFB\d+|LFE\d+)\b"
)


class Listing(BaseModel):
    view: View
    text: str = ""
    """The listing, filtered; empty when it could not be made (``problem`` says why)."""
    problem: str | None = None
    lines: int = 0
    """Lines of the filtered listing before ``max_lines`` cut it."""
    functions: list[str] = Field(default_factory=list)
    """The functions (kernels) the whole listing holds, by symbol."""


def listing(
    solution: Solution,
    view: View,
    function: str | None = None,
    pattern: str | None = None,
    max_lines: int = 200,
    cache_root: Path | None = None,
) -> Listing:
    """``view`` of ``solution``'s generated code: only ``function`` (a name its symbol contains) and only lines
    matching the regular expression ``pattern`` (with the function or label they belong to), at most
    ``max_lines`` lines."""
    language = solution.spec.language
    allowed = VIEWS.get(language, ())
    if view not in allowed:
        views = ", ".join(allowed) or "none"
        return Listing(view=view, problem=f"{view} is not a view of {language.value} code (its views: {views})")
    try:
        wanted = re.compile(pattern) if pattern else None
    except re.error as exc:
        return Listing(view=view, problem=f"pattern {pattern!r} is not a regular expression: {exc}")
    if language == Language.CUDA:
        text, problem = _cuda(solution, view, cache_root)
    else:
        text, problem = _cxx(solution, view)
    if problem is not None:
        return Listing(view=view, problem=problem)
    sections = split_functions(text, view)
    functions = [name for name, _ in sections if name]
    if function:
        sections = [(name, body) for name, body in sections if name and function in name]
        if not sections:
            known = ", ".join(functions[:20]) or "none"
            return Listing(view=view, problem=f"no function matches {function!r}; the listing holds: {known}")
    lines: list[str] = []
    for name, body in sections:
        kept = body.splitlines()
        if view == "asm":
            kept = [line for line in kept if not _ASM_NOISE.match(line)]
        if wanted is not None:
            kept = [line for line in kept if wanted.search(line)]
            if kept and name:
                kept = [f"== {name} ==", *kept]
        lines += kept
    shown = lines[:max_lines]
    if len(lines) > max_lines:
        shown.append(f"... {len(lines) - max_lines} more lines: narrow it with function or pattern")
    return Listing(view=view, text="\n".join(shown), lines=len(lines), functions=functions)


def split_functions(text: str, view: View) -> list[tuple[str, str]]:
    """The listing cut into (function symbol, its text); text outside any function has the name ''."""
    if view == "vectorization":
        return [("", text)]
    starts = {
        "ptx": re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", re.M),
        "sass": re.compile(r"^\s*Function\s*:\s*(\S+)", re.M),
        "asm": re.compile(r"^([A-Za-z_.$][\w.$]*):\s*$", re.M),
    }[view]
    found = [(m.start(), m.group(1)) for m in starts.finditer(text)]
    if view == "asm":  # local labels (.L3:) belong to the function around them
        found = [(at, name) for at, name in found if not name.startswith(".L")]
    sections: list[tuple[str, str]] = []
    if not found or found[0][0] > 0:
        sections.append(("", text[: found[0][0]] if found else text))
    for i, (at, name) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(text)
        sections.append((name, text[at:end]))
    return sections


def _cuda(solution: Solution, view: View, cache_root: Path | None) -> tuple[str, str | None]:
    built = build(solution, cache_root)
    if not built.ok:
        return "", "the kernel does not compile: use compile to see why"
    if view == "ptx":
        if built.ptx is None or not Path(built.ptx).is_file():
            return "", "the build kept no PTX"
        return Path(built.ptx).read_text(errors="replace"), None
    if built.artifact is None:
        return "", "the build made no artifact"
    kept = Path(built.artifact).with_suffix(".sass")
    if kept.is_file():
        return kept.read_text(errors="replace"), None
    sass, why = nvcc.disassemble(Path(built.artifact))
    if sass is None:
        return "", f"no SASS: {why}"
    return sass, None


def _cxx(solution: Solution, view: View) -> tuple[str, str | None]:
    sources = [s for s in solution.sources if s.path.endswith(_CXX)]
    if not sources:
        return "", f"no C/C++ source among {[s.path for s in solution.sources]}"
    flags = list(solution.spec.compile_flags if solution.spec.compile_flags is not None else DEFAULT_CXX_FLAGS)
    with tempfile.TemporaryDirectory(prefix="evoteam-listing-") as folder:
        work = Path(folder)
        for source in solution.sources:
            (work / source.path).parent.mkdir(parents=True, exist_ok=True)
            (work / source.path).write_text(source.content)
        texts = []
        for source in sources:
            out = f"{source.path}.s"
            report = ["-fopt-info-vec-optimized-missed"] if view == "vectorization" else []
            cmd = [cxx_compiler(), "-S", "-fPIC", *flags, *report, "-o", out, source.path]
            try:
                done = run_confined(cmd, work, BUILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return "", f"the compiler ran past {BUILD_TIMEOUT_S:.0f} s"
            except OSError as exc:
                return "", f"cannot run the compiler {cmd[0]!r}: {exc}"
            if done.returncode != 0:
                return "", "the kernel does not compile: use compile to see why"
            if view == "vectorization":  # a loop is reported once per way it was tried: each line once
                texts.append("\n".join(dict.fromkeys(done.stderr.splitlines())))
            else:
                texts.append((work / out).read_text(errors="replace"))
    return "\n".join(texts), None
