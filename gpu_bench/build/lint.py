"""A lint of C/C++/CUDA candidates for what a kernel has no business doing inside a benchmark harness.

Threads and processes that outlive the call, signal handlers and alarms, reads of ``/proc`` (the harness's
memory is not an input), the Python C API, streams other than the one passed in, and changes to the
floating-point state, the environment or the CPU affinity, and mutable static state kept across calls: each
is a warning with the line and a reason,
so the agents (the compile tool) and the editor (diagnostics) see it. It is a signal, not the defence: the
evaluator's own checks hold whatever the lint misses. OpenMP (``#pragma omp``) is a legitimate way to use
threads and is not flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evoteam.gpu_bench.schema import Diagnostic, Severity, Solution

TOOL = "evoteam-lint"
_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".cu", ".cuh", ".h", ".hpp")


@dataclass(frozen=True)
class Rule:
    code: str
    pattern: re.Pattern[str]
    message: str


RULES = [
    Rule(
        "threads",
        re.compile(r"\bstd::(?:thread|jthread|async)\b|\bpthread_create\s*\("),
        "starts a thread: work that outlives the call is not timed and can race the next call (use OpenMP "
        "inside the call, or nothing)",
    ),
    Rule(
        "processes",
        re.compile(r"\b(?:fork|vfork|posix_spawnp?|execv|execvp|execve|execl|execlp|execle|system|popen)\s*\("),
        "starts a process: a kernel computes its outputs itself, inside the call",
    ),
    Rule(
        "signals",
        re.compile(r"\b(?:signal|sigaction|alarm|setitimer|ualarm|timer_create)\s*\("),
        "installs a signal handler or an alarm: the harness's process state is not the kernel's to change",
    ),
    Rule(
        "proc",
        re.compile(r"\"/proc/|\"/dev/mem|process_vm_readv\s*\("),
        "reads /proc or another process's memory: the harness's state and the reference are not inputs",
    ),
    Rule(
        "python",
        re.compile(r"#\s*include\s*[<\"]Python\.h[>\"]|\bPy[A-Z][A-Za-z_]*\s*\(|\bPy_[A-Za-z]+\s*\(|libpython"),
        "calls into the Python C API: a kernel works on the buffers it is given",
    ),
    Rule(
        "streams",
        re.compile(r"\bcudaStreamCreate\w*\s*\(|\bcudaStreamPerThread\b|\bcudaStreamLegacy\b|\bcuStreamCreate\w*\("),
        "creates or uses a stream other than the one the harness passes: launch on the given stream, or the "
        "work is not timed (and is rejected when detected)",
    ),
    Rule(
        "fp-state",
        re.compile(r"\b(?:fesetround|fesetenv|feupdateenv|_MM_SET_FLUSH_ZERO_MODE|_MM_SET_DENORMALS_ZERO_MODE)\b"),
        "changes the floating-point state (rounding, flush-to-zero): it outlives the call",
    ),
    Rule(
        "state",
        re.compile(r"(?<!\w)static\s+(?!constexpr\b)(?!const\s+[\w:]+\s+\w+\s*(?:\[[^\]]*\]\s*)?=)[^;=(]*(?:=[^;]*)?;"),
        "keeps mutable state across calls (a static variable): a cache by pointer or shape, or a call count, "
        "makes later calls do other work than the first; the evaluator checks random timed calls on inputs "
        "it rotates, so keep kernels stateless",
    ),
    Rule(
        "environment",
        re.compile(r"\b(?:setenv|putenv|unsetenv|clearenv)\s*\("),
        "changes the environment: it outlives the call",
    ),
    Rule(
        "affinity",
        re.compile(r"\b(?:sched_setaffinity|pthread_setaffinity_np|sched_setscheduler|setpriority|nice)\s*\("),
        "changes CPU affinity or scheduling: the harness sets the thread policy",
    ),
]

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def lint_source(path: str, text: str) -> list[Diagnostic]:
    """Warnings for one source file (comments are not code: they are blanked first, lines kept)."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found: list[Diagnostic] = []
    for number, line in enumerate(code.splitlines(), start=1):
        for rule in RULES:
            match = rule.pattern.search(line)
            if match:
                found.append(
                    Diagnostic(
                        file=path,
                        line=number,
                        column=match.start() + 1,
                        end_column=match.end() + 1,
                        severity=Severity.WARNING,
                        code=f"{TOOL}/{rule.code}",
                        message=f"{match.group(0).strip()}: {rule.message}",
                        tool=TOOL,
                    )
                )
    return found


def lint_solution(solution: Solution) -> list[Diagnostic]:
    """Warnings for every C/C++/CUDA source of ``solution`` (none for Python)."""
    return [
        diagnostic
        for source in solution.sources
        if source.path.endswith(_SUFFIXES)
        for diagnostic in lint_source(source.path, source.content)
    ]
