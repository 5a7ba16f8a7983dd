"""Every KernelBench problem of a folder at small CPU sizes: imported, then its starting candidate (the problem's
Model as ModelNew) measured against its baseline (the same Model), paired and interleaved. A harness that is
right about itself says PASSED with a speedup whose 95% interval holds 1 (a tie); anything else is counted
with its reason.

    python benchmarks/kernelbench_suite.py KernelBench/level1 --max-mb 4 [--limit N] [--json] [--no-isolate]

Each problem is imported at the largest size whose tensors fit ``--max-mb`` (its own ``--scale``, halved until
it fits, ``import_problem``'s rule), with KernelBench's seed, tolerance and per-trial ``get_inputs()``.
"""

from __future__ import annotations

import argparse
import json
import re
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
    KernelBenchError,
    LocalRunner,
    TimingConfig,
    fitting_scale,
    import_problem,
    load_tasks,
    write_task,
)
from evoteam.gpu_bench.api import KernelBenchImportOptions as ImportOptions

TIMING = TimingConfig(warmup_s=0.02, min_samples=10, max_samples=200, max_time_s=0.5, flush_cache=False)


@dataclass
class Outcome:
    problem: str
    stage: str
    """``import`` (refused at import), ``evaluate`` (evaluated), ``load`` (did not build or load)."""
    status: str
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    scale: float | None = None
    reason: str = ""
    seconds: float = 0.0

    @property
    def tie(self) -> bool:
        return self.status == "PASSED" and self.ci is not None and self.ci[0] <= 1.0 <= self.ci[1]


def problems(folder: Path) -> list[Path]:
    """The folder's problem files in KernelBench's order (by their leading number)."""

    def number(path: Path) -> tuple[int, str]:
        found = re.match(r"(\d+)_", path.name)
        return (int(found.group(1)) if found else 10**9, path.name)

    return sorted((p for p in folder.glob("*.py") if not p.name.startswith("model_new")), key=number)


def measure(problem: Path, out: Path, runner: LocalRunner, max_mb: float, config: EvalConfig) -> Outcome:
    started = time.perf_counter()
    name = f"kb_{re.sub(r'[^A-Za-z0-9]+', '_', problem.stem).strip('_').lower()}"
    try:
        scale = fitting_scale(problem, ImportOptions(name=name), max_mb)
        imported = import_problem(problem, ImportOptions(name=name, scale=scale, max_mb=max_mb))
        write_task(imported, out)
    except KernelBenchError as exc:
        return Outcome(problem.name, "import", "REFUSED", reason=str(exc), seconds=time.perf_counter() - started)
    (task,) = [t for t in load_tasks(out / "evoteam.toml") if t.name == name]
    definition, workloads = task.load_definition(), task.load_workloads()
    evaluator = Evaluator(runner)
    result = evaluator.evaluate(
        definition,
        workloads,
        task.source_solution(definition),
        task.baseline_solution(definition),
        config.model_copy(update=task.tolerance.model_dump()),
        task.blob_root(),
    )
    seconds = time.perf_counter() - started
    if result.load_error:
        return Outcome(problem.name, "load", result.status.value, reason=result.load_error[-300:], seconds=seconds)
    summary = result.summary
    reason = summary.worst.reason if summary.worst and summary.worst.reason else ""
    return Outcome(
        problem.name,
        "evaluate",
        result.status.value,
        speedup=summary.geomean_speedup,
        ci=summary.geomean_ci,
        scale=scale,
        reason=reason[:300],
        seconds=seconds,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path, help="a folder of KernelBench problem files (KernelBench/level1)")
    parser.add_argument("--max-mb", type=float, default=4.0, help="MiB of tensors a problem may hold (default 4)")
    parser.add_argument("--limit", type=int, help="the first N problems only")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    parser.add_argument(
        "--no-isolate", action="store_true", help="call the models in the worker (default: each in a Python host)"
    )
    args = parser.parse_args()
    files = problems(args.folder)[: args.limit]
    if not files:
        print(f"kernelbench_suite: no problem files in {args.folder}", file=sys.stderr)
        return 2
    config = EvalConfig(timeout_s=120.0, timing=TIMING, isolate=not args.no_isolate)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="evoteam-kernelbench-") as scratch:
        runner = LocalRunner(cache_root=Path(scratch) / "cache", memory_limit_mb=8192)
        try:
            for problem in files:
                outcomes.append(measure(problem, Path(scratch) / "tasks", runner, args.max_mb, config))
                print(f"{outcomes[-1].problem}: {outcomes[-1].status}", file=sys.stderr)
        finally:
            runner.close()
    counts = tally(outcomes)
    if args.json:
        print(json.dumps({"counts": counts, "problems": [asdict(o) | {"tie": o.tie} for o in outcomes]}))
        return 0
    show(outcomes, counts)
    return 0


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    evaluated = [o for o in outcomes if o.stage == "evaluate"]
    return {
        "problems": len(outcomes),
        "imported": sum(o.stage != "import" for o in outcomes),
        "passed": sum(o.status == "PASSED" for o in evaluated),
        "ties": sum(o.tie for o in evaluated),
        "refused_at_import": sum(o.stage == "import" for o in outcomes),
        "did_not_load": sum(o.stage == "load" for o in outcomes),
        "failed": sum(o.status != "PASSED" for o in evaluated),
    }


def show(outcomes: list[Outcome], counts: dict[str, int]) -> None:
    console = Console()
    table = Table(title="KernelBench problems: the starting candidate against its baseline (the same Model)")
    for column in ("problem", "scale", "status", "speedup", "95% CI", "s", "reason"):
        table.add_column(column)
    for o in outcomes:
        table.add_row(
            o.problem,
            f"{o.scale:g}" if o.scale is not None else "1",
            o.status + (" (tie)" if o.tie else ""),
            f"{o.speedup:.3f}" if o.speedup is not None else "-",
            f"{o.ci[0]:.3f}-{o.ci[1]:.3f}" if o.ci else "-",
            f"{o.seconds:.1f}",
            o.reason[:120],
        )
    console.print(table)
    console.print(" · ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    raise SystemExit(main())
