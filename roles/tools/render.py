"""Compact text for the model from compile and evaluation facts (diagnostics, resources, results, profiles)."""

from __future__ import annotations

from collections.abc import Sequence

from evoteam.gpu_bench.api import CandidateResult, Diagnostic, EvaluationStatus, KernelResources, WorkloadResult

MAX_FAILURES = 5
MAX_SLOWEST = 3
LOG_TAIL = 1500


def diagnostic(d: Diagnostic) -> str:
    """``file:line:col: severity: message`` (line and column left out when the tool gave none)."""
    where = d.file
    if d.line:
        where += f":{d.line}"
        if d.column:
            where += f":{d.column}"
    code = f" [{d.code}]" if d.code else ""
    lines = [f"{where}: {d.severity.value}: {d.message}{code}"]
    for r in d.related:
        place = f"{r.file}:{r.line}" + (f":{r.column}" if r.column else "") if r.line else r.file
        lines.append(f"    {place}: note: {r.message}")
    return "\n".join(lines)


def diagnostics(items: Sequence[Diagnostic], limit: int = 20) -> str:
    shown = [diagnostic(d) for d in items[:limit]]
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit} more diagnostics")
    return "\n".join(shown)


def resources(items: Sequence[KernelResources]) -> str:
    """One line per kernel: registers, spills, shared memory, stack."""
    lines = []
    for k in items:
        parts = [f"{k.registers} regs"]
        if k.spill_stores or k.spill_loads:
            parts.append(f"spills {k.spill_stores} B stored / {k.spill_loads} B loaded")
        else:
            parts.append("no spills")
        parts.append(f"smem {k.shared_bytes} B")
        if k.stack_bytes:
            parts.append(f"stack {k.stack_bytes} B")
        if k.barriers:
            parts.append(f"{k.barriers} barriers")
        lines.append(f"{k.name} ({k.arch}): " + ", ".join(parts))
    return "\n".join(lines)


def log_tail(log: str, limit: int = LOG_TAIL) -> str:
    log = log.strip()
    return log if len(log) <= limit else "..." + log[-limit:]


def _speed(x: float | None) -> str:
    return f"{x:.3f}x" if x is not None else "n/a"


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def result(r: CandidateResult) -> str:
    """Status, geomean, faster/total, the first failing workloads with reasons, and the slowest workloads."""
    s = r.summary
    head = f"status: {r.status.value}"
    if s.geomean_speedup is not None:
        head += f" — geomean {_speed(s.geomean_speedup)}, mean {_speed(s.mean_speedup)}"
    head += f"; {s.faster}/{s.total} workloads faster than baseline {r.baseline!r} ({s.passed} passed)"
    lines = [head]
    if r.status == EvaluationStatus.COMPILE_ERROR:
        if r.build.diagnostics:
            lines += ["compiler diagnostics:", diagnostics(r.build.diagnostics)]
        else:
            lines += ["build log (tail):", log_tail(r.load_error or r.build.log)]
        return "\n".join(lines)
    if r.violations:
        lines += ["constraint violations (nothing ran):", *(f"  - {v}" for v in r.violations)]
    failures = [w for w in r.workloads if w.status != EvaluationStatus.PASSED]
    if failures:
        lines.append(f"failing workloads ({len(failures)}; first {min(len(failures), MAX_FAILURES)}):")
        lines += [f"  - {w.uuid} {w.axes}: {w.status.value}: {_first_line(w.reason)}" for w in failures[:MAX_FAILURES]]
    timed = sorted((w for w in r.workloads if w.speedup is not None), key=lambda w: w.speedup or 0.0)
    if timed:
        lines.append("slowest workloads:")
        lines += [f"  - {_timed(w)}" for w in timed[:MAX_SLOWEST]]
    kernels = r.resources or r.build.resources
    if kernels:
        lines += ["resources:", resources(kernels)]
    return "\n".join(lines)


def _timed(w: WorkloadResult) -> str:
    text = f"{w.uuid} {w.axes}: {_speed(w.speedup)}"
    if w.timing is not None and w.baseline_timing is not None:
        text += f" (median {w.timing.median_ms:.4g} ms vs baseline {w.baseline_timing.median_ms:.4g} ms)"
    return text


def summary_data(r: CandidateResult, content_hash: str = "") -> dict[str, object]:
    """The evaluation summary as plain JSON data (for the journal, the supervisor and ``Submission``)."""
    s = r.summary
    return {
        "status": r.status.value,
        "solution": r.solution,
        "baseline": r.baseline,
        "content_hash": content_hash,
        "geomean_speedup": s.geomean_speedup,
        "mean_speedup": s.mean_speedup,
        "faster": s.faster,
        "passed": s.passed,
        "total": s.total,
        "worst": s.worst.model_dump(mode="json") if s.worst else None,
        "failures": [
            {"uuid": w.uuid, "status": w.status.value, "reason": _first_line(w.reason, 500)}
            for w in r.workloads
            if w.status != EvaluationStatus.PASSED
        ][:MAX_FAILURES],
        "speedups": {w.uuid: w.speedup for w in r.workloads if w.speedup is not None},
        "violations": list(r.violations),
    }
