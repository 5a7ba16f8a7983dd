"""FlashInfer Trace definitions end to end: imported as tasks, each task's starting kernel (the reference with a
copy into the outputs) benched against the reference, exported as a FlashInfer-Bench dataset, and loaded back
with flashinfer-bench's own ``TraceSet`` (when it is installed). Prints one row per definition and the counts.

    python benchmarks/flashinfer_suite.py ../shared/data/flashinfer-trace --definition 'rmsnorm_*' \\
        --definition 'gemm_*' --definition 'gqa_*' --max-mb 32 --max-workloads 2 [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import (
    EvalConfig,
    Evaluator,
    ExportError,
    FlashInferImportError,
    KernelTask,
    LocalRunner,
    TimingConfig,
    export_flashinfer,
    import_flashinfer,
    load_tasks,
    reference_solution,
)
from evoteam.gpu_bench.api import FlashInferImportOptions as ImportOptions

TIMING = TimingConfig(warmup_s=0.01, min_samples=10, max_samples=100, max_time_s=0.3, flush_cache=False)


@dataclass
class Outcome:
    definition: str
    stage: str
    """``import`` (skipped at import), ``evaluate``, ``export`` (not writable), ``load`` (flashinfer-bench
    refused the export), ``done``."""
    status: str = ""
    workloads: int = 0
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    loaded_traces: int | None = None
    """Traces flashinfer-bench loaded from the export (None: it is not installed)."""
    reason: str = ""
    seconds: float = 0.0

    @property
    def tie(self) -> bool:
        return self.status == "PASSED" and self.ci is not None and self.ci[0] <= 1.0 <= self.ci[1]


def run_suite(dataset: Path, patterns: list[str], max_mb: float, max_workloads: int, scratch: Path) -> list[Outcome]:
    tasks_dir, export_dir = scratch / "tasks", scratch / "fib-out"
    try:
        report = import_flashinfer(
            dataset, tasks_dir, ImportOptions(definitions=patterns, max_mb=max_mb, max_workloads=max_workloads)
        )
    except FlashInferImportError as exc:
        raise SystemExit(f"flashinfer_suite: {exc}") from None
    outcomes = [Outcome(s.name, "import", "SKIPPED", reason=s.reason) for s in report.skipped]
    tasks = load_tasks(tasks_dir / "evoteam.toml") if report.imported else []
    runner = LocalRunner(cache_root=scratch / "cache", memory_limit_mb=8192)
    try:
        for task in tasks:
            outcomes.append(measure(task, Evaluator(runner), export_dir))
            print(f"{task.name}: {outcomes[-1].status} ({outcomes[-1].stage})", file=sys.stderr)
    finally:
        runner.close()
    return outcomes


def measure(task: KernelTask, evaluator: Evaluator, export_dir: Path) -> Outcome:
    started = time.perf_counter()
    definition, workloads = task.load_definition(), task.load_workloads()
    candidate = task.source_solution(definition)
    config = EvalConfig(timeout_s=120.0, timing=TIMING, **task.tolerance.model_dump())
    result = evaluator.evaluate(
        definition, workloads, candidate, reference_solution(definition), config, task.blob_root()
    )
    outcome = Outcome(
        definition.name,
        "evaluate",
        result.status.value,
        workloads=len(workloads),
        speedup=result.summary.geomean_speedup,
        ci=result.summary.geomean_ci,
        reason=(result.summary.worst.reason or "") if result.summary.worst else "",
    )
    try:
        export_flashinfer(candidate, definition, result.traces, export_dir, blob_root=task.blob_root())
    except ExportError as exc:
        outcome.stage, outcome.reason = "export", str(exc)
        outcome.seconds = time.perf_counter() - started
        return outcome
    outcome.stage = "done"
    try:
        from flashinfer_bench.data import TraceSet
    except ImportError:
        outcome.seconds = time.perf_counter() - started
        return outcome
    try:
        loaded = TraceSet.from_path(str(export_dir))
        outcome.loaded_traces = sum(1 for t in loaded.traces.get(definition.name, []) if t.solution == candidate.name)
    except Exception as exc:  # flashinfer-bench refusing the export is the finding, with its reason
        outcome.stage, outcome.reason = "load", f"{type(exc).__name__}: {exc}"[:300]
    outcome.seconds = time.perf_counter() - started
    return outcome


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    done = [o for o in outcomes if o.stage in ("done", "export", "load")]
    return {
        "definitions": len(outcomes),
        "imported": sum(o.stage != "import" for o in outcomes),
        "passed": sum(o.status == "PASSED" for o in done),
        "ties": sum(o.tie for o in done),
        "exported": sum(o.stage in ("done", "load") for o in outcomes),
        "loaded_by_flashinfer_bench": sum(o.stage == "done" and bool(o.loaded_traces) for o in outcomes),
        "skipped_at_import": sum(o.stage == "import" for o in outcomes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--definition", action="append", default=[], help="name or shell pattern (repeatable)")
    parser.add_argument("--max-mb", type=float, default=32.0)
    parser.add_argument("--max-workloads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evoteam-fib-suite-") as scratch:
        outcomes = run_suite(args.dataset, args.definition, args.max_mb, args.max_workloads, Path(scratch))
    counts = tally(outcomes)
    if args.json:
        print(json.dumps({"counts": counts, "definitions": [asdict(o) | {"tie": o.tie} for o in outcomes]}))
        return 0
    table = Table(title="FlashInfer Trace: imported, benched against the reference, exported, loaded back")
    for column in ("definition", "stage", "status", "workloads", "speedup", "95% CI", "traces loaded", "reason"):
        table.add_column(column)
    for o in outcomes:
        table.add_row(
            o.definition,
            o.stage,
            o.status + (" (tie)" if o.tie else ""),
            str(o.workloads),
            f"{o.speedup:.3f}" if o.speedup is not None else "-",
            f"{o.ci[0]:.3f}-{o.ci[1]:.3f}" if o.ci else "-",
            "-" if o.loaded_traces is None else str(o.loaded_traces),
            o.reason[:100],
        )
    console = Console()
    console.print(table)
    console.print(" · ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
