"""Compile-only checks: diagnostics, ptxas resources and constraint violations of a solution or a file.

This is what ``evoteam check`` prints, what the agents' compile tool returns and what the language server
shows on save. It builds through the same cache as the evaluator (a later ``bench`` of the same code is a
cache hit), needs no GPU and imports no torch.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field

from evoteam.gpu_bench.build.builder import BuildResult, build, keep_in_entry
from evoteam.gpu_bench.build.cuda import nvcc
from evoteam.gpu_bench.build.cuda.constraints import Constraints, check, found
from evoteam.gpu_bench.build.cuda.instruction_classes import code_lines
from evoteam.gpu_bench.schema import Binding, BuildSpec, Diagnostic, KernelResources, Language, Solution, SourceFile
from evoteam.gpu_bench.task import KernelTask, TaskError, find_config, load_tasks

_LANGUAGES = {".cu": Language.CUDA, ".cpp": Language.CPP, ".cc": Language.CPP, ".cxx": Language.CPP}


class CheckResult(BaseModel):
    ok: bool
    """It compiled (constraints aside)."""
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    resources: list[KernelResources] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    """Constraints the generated code breaks; a candidate with any is REJECTED by the evaluator."""
    notes: list[str] = Field(default_factory=list)
    """What could not be checked, and why."""
    arch: str | None = None
    cached: bool = False
    seconds: float = 0.0
    log: str = ""


def check_solution(
    solution: Solution, constraints: Constraints | None = None, cache_root: Path | None = None
) -> CheckResult:
    start = time.perf_counter()
    built = build(solution, cache_root)
    result = CheckResult(
        ok=built.ok,
        diagnostics=built.diagnostics,
        resources=built.resources,
        arch=built.arch,
        cached=built.cached,
        log=built.log,
    )
    if built.ok and constraints is not None and not constraints.is_empty():
        if solution.spec.language != Language.CUDA:
            result.notes.append("constraints apply to CUDA code (PTX/SASS) and were not checked for this language")
        else:
            ptx, sass, notes = generated_code(built, constraints)
            result.notes += notes
            if sass is not None:
                result.violations = check(constraints, ptx, sass, built.resources)
            else:  # a required SASS instruction cannot be confirmed: say so rather than pass or guess
                in_ptx = [p for p in constraints.require if found(p, code_lines(ptx), "")]
                ptx_only = constraints.model_copy(update={"require": in_ptx})
                result.violations = check(ptx_only, ptx, "", built.resources) + [
                    f"cannot verify that {p!r} appears: it is not in the PTX and no SASS could be read"
                    for p in constraints.require
                    if p not in in_ptx
                ]
    result.seconds = time.perf_counter() - start
    return result


def unverified_constraints(constraints: Constraints, resources: list[KernelResources], why: str) -> list[str]:
    """What a candidate built elsewhere (a remote runner) breaks, when this machine could not compile it: the
    register and spill limits are checked on the builder's ptxas facts; required and forbidden instructions
    cannot be, and are reported as unverifiable rather than passed."""
    facts_only = constraints.model_copy(update={"require": [], "forbid": []})
    code = [*constraints.require, *constraints.forbid]
    return check(facts_only, "", "", resources) + [
        f"cannot verify {p!r} in the generated code: this machine could not compile the candidate ({why})" for p in code
    ]


def generated_code(built: BuildResult, constraints: Constraints) -> tuple[str, str | None, list[str]]:
    """(PTX, SASS or None, notes); the SASS is disassembled once per cached build and kept beside it."""
    ptx = Path(built.ptx).read_text(errors="replace") if built.ptx and Path(built.ptx).is_file() else ""
    if not constraints.needs_code() or built.artifact is None:
        return ptx, "", []
    artifact = Path(built.artifact)
    kept = artifact.with_suffix(".sass")
    if kept.is_file():
        return ptx, kept.read_text(errors="replace"), []
    sass, why = nvcc.disassemble(artifact)
    if sass is None:
        return ptx, None, [f"SASS not checked: {why}"]
    keep_in_entry(kept, sass)  # recorded in the entry's manifest; a read-only cache still gets an answer
    return ptx, sass, []


def check_file(
    path: Path, arch: str | None = None, cache_root: Path | None = None, flags: list[str] | None = None
) -> CheckResult:
    """Checks one source file: as its evoteam.toml task when it is one (flags, extra sources, constraints),
    otherwise on its own. ``arch`` overrides the target. Raises ``TaskError`` for unusable input."""
    path = path.resolve()
    if not path.is_file():
        raise TaskError(f"no such file: {path}")
    task = task_for(path)
    if task is not None:
        solution = task.source_solution(task.load_definition())
        constraints: Constraints | None = task.constraints
    else:
        # its own folder on the include path, so local headers resolve as they do in the editor
        solution = standalone_solution(path, [*(flags if flags is not None else ["-O3"]), f"-I{path.parent}"])
        constraints = None
    if arch is not None:
        if not nvcc.is_arch(arch):
            raise TaskError(f"--arch must look like sm_90a or sm_100a, not {arch!r}")
        spec = solution.spec.model_copy(update={"target_hardware": [arch]})
        solution = solution.model_copy(update={"spec": spec})
    if flags is not None and task is not None:
        solution = solution.model_copy(update={"spec": solution.spec.model_copy(update={"compile_flags": flags})})
    return check_solution(solution, constraints, cache_root)


def task_for(path: Path) -> KernelTask | None:
    """The evoteam.toml task whose source is ``path``, if any (the first one)."""
    config = find_config(path.parent)
    if config is None:
        return None
    for task in load_tasks(config):
        if task.source.resolve() == path:
            return task
    return None


def standalone_solution(path: Path, flags: list[str] | None) -> Solution:
    language = _LANGUAGES.get(path.suffix)
    if language is None:
        known = ", ".join(sorted(_LANGUAGES))
        raise TaskError(f"cannot check {path.name}: evoteam checks {known} files (headers through a source)")
    spec = BuildSpec(
        language=language,
        target_hardware=[nvcc.DEFAULT_ARCH if language == Language.CUDA else "cpu"],
        entry_point=f"{path.name}::check",
        binding=Binding.C,
        compile_flags=flags,
    )
    source = SourceFile(path=path.name, content=path.read_text())
    return Solution(name=path.stem, definition="check", author="user", spec=spec, sources=[source])
