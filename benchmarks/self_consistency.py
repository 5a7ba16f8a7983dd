"""Self-consistency: identical kernels benched against each other must tie, even on a busy machine.

For each kernel (the plain C and the OpenMP rmsnorm of ``examples/rmsnorm``, the definition's Python/torch
reference, and the CUDA rmsnorm where a GPU exists), an identical copy is the baseline. Both methods of the
evaluator run in the same session, side by side: *paired* (the default: the two timed alternately in one
worker, per-pair ratios, the median's 95% interval) and *unpaired* (each timed on its own, the ratio of the
two medians, the method before paired timing). While it runs, ``--burners`` processes each burn a CPU core.

Printed per workload: the paired ratio, its interval and whether the interval holds 1, the unpaired ratio;
then, per method, how many ratios lie in [0.97, 1.03] (and for paired, how many intervals hold 1, beside how
many a calibrated 95% interval misses by chance alone: about 1 in 20, so 27 intervals all hold 1 in only a
quarter of runs).
The goal on a CPU: every paired ratio in [0.97, 1.03], every interval holding 1.

It is a benchmark, not a test: it prints figures and exits 0 unless an evaluation fails.
Run from the repository root: ``python benchmarks/self_consistency.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import (
    CandidateResult,
    EvalConfig,
    Evaluator,
    KernelTask,
    LocalRunner,
    Solution,
    TimingConfig,
    cpu_name,
    find_task,
    reference_solution,
    thread_policy,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = REPO_ROOT / "examples" / "rmsnorm"
TIE = (0.97, 1.03)


@dataclass
class Row:
    kernel: str
    workload: str
    paired: float | None
    ci: tuple[float, float] | None
    unpaired: float | None
    flags: list[str]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kernels", default="rmsnorm,rmsnorm_tuned,reference", help="comma-separated")
    parser.add_argument("--burners", type=int, default=1, help="CPU-burning processes while timing (0: none)")
    parser.add_argument("--max-time", type=float, default=1.0, help="timing cap per kernel and workload, seconds")
    parser.add_argument("--workloads", type=int, default=0, help="only the first N workloads (0: all)")
    parser.add_argument("--json", type=Path, help="also write the rows here (the device check's figures read it)")
    parser.add_argument(
        "--threads", type=int, default=None, help="threads kernels may use (default: the worker's, one per CPU)"
    )
    args = parser.parse_args(argv)
    console = Console(width=140)
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    if _cuda_available() and "rmsnorm_cuda" not in kernels:
        kernels.append("rmsnorm_cuda")
    config = EvalConfig(timing=TimingConfig(max_time_s=args.max_time), timeout_s=120.0)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as cache, _burning(args.burners):
        for kernel in kernels:
            task = find_task("rmsnorm" if kernel == "reference" else kernel, EXAMPLE)
            rows += _bench(kernel, task, config, Path(cache), args.workloads, console, args.threads)
    _print(rows, console, args.burners, args.threads)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
    return 0


def _bench(
    kernel: str, task: KernelTask, config: EvalConfig, cache: Path, limit: int, console: Console, threads: int | None
) -> list[Row]:
    definition = task.load_definition()
    workloads = task.load_workloads()
    workloads = workloads[:limit] if limit else workloads
    reference = kernel == "reference"
    candidate = reference_solution(definition, "cpu") if reference else task.source_solution(definition)
    copy = candidate.model_copy(update={"name": f"{candidate.name}-copy"})
    results: dict[bool, CandidateResult] = {}
    for paired in (True, False):
        policy = thread_policy(threads=threads) if threads else None
        runner = LocalRunner(cache_root=cache, gpu=0 if kernel == "rmsnorm_cuda" else None, threads=policy)
        try:
            evaluator = Evaluator(runner, paired=paired)
            results[paired] = evaluator.evaluate(definition, workloads, candidate, copy, config, task.blob_root())
        finally:
            runner.close()
        console.print(f"{kernel}: {'paired' if paired else 'unpaired'} done", highlight=False)
    _check(results[True], candidate)
    _check(results[False], candidate)
    rows = []
    for p, u in zip(results[True].workloads, results[False].workloads, strict=True):
        axes = " ".join(f"{k}={v}" for k, v in p.axes.items()) or p.uuid[:8]
        rows.append(Row(kernel, axes, p.speedup, p.ci, u.speedup, p.flags))
    return rows


def _check(result: CandidateResult, candidate: Solution) -> None:
    if result.status.value != "PASSED":
        failed = [w for w in result.workloads if w.status.value != "PASSED"]
        reason = failed[0].reason if failed else result.load_error or result.build.log[-500:]
        raise SystemExit(f"{candidate.name}: {result.status.value}: {reason}")


def _print(rows: list[Row], console: Console, burners: int, threads: int | None) -> None:
    policy = f" · {threads} thread(s)" if threads else ""
    table = Table(title=f"identical kernels against each other · {cpu_name()} · {burners} CPU burner(s){policy}")
    for column in ("kernel", "workload", "paired ratio", "95% CI", "CI holds 1", "unpaired ratio", "flags"):
        table.add_column(column, justify="left" if column in ("kernel", "workload", "flags") else "right")
    for r in rows:
        holds = r.ci is not None and r.ci[0] <= 1.0 <= r.ci[1]
        table.add_row(
            r.kernel,
            r.workload,
            _ratio(r.paired),
            f"{r.ci[0]:.3f}-{r.ci[1]:.3f}" if r.ci else "-",
            "yes" if holds else "NO",
            _ratio(r.unpaired),
            ", ".join(r.flags),
        )
    console.print(table)
    n = len(rows)
    paired_tied = sum(1 for r in rows if r.paired is not None and TIE[0] <= r.paired <= TIE[1])
    unpaired_tied = sum(1 for r in rows if r.unpaired is not None and TIE[0] <= r.unpaired <= TIE[1])
    held = sum(1 for r in rows if r.ci is not None and r.ci[0] <= 1.0 <= r.ci[1])
    spread = [r.paired for r in rows if r.paired is not None]
    spread_u = [r.unpaired for r in rows if r.unpaired is not None]
    console.print(
        f"paired:   {paired_tied}/{n} ratios in [{TIE[0]}, {TIE[1]}], {held}/{n} intervals hold 1, "
        f"range {min(spread):.3f}-{max(spread):.3f}",
        highlight=False,
    )
    console.print(
        f"unpaired: {unpaired_tied}/{n} ratios in [{TIE[0]}, {TIE[1]}], range {min(spread_u):.3f}-{max(spread_u):.3f}",
        highlight=False,
    )
    intervals = sum(1 for r in rows if r.ci is not None)
    console.print(chance_line(intervals - held, intervals), highlight=False)


def chance_line(missed: int, intervals: int, level: float = 0.95) -> str:
    """How the intervals that miss 1 compare with chance: a calibrated ``level`` interval misses the true ratio
    (1, for identical kernels) in ``1 - level`` of workloads, so ``intervals`` of them all hold it only with
    probability ``level ** intervals``."""
    expected = (1 - level) * intervals
    all_hold = level**intervals
    return (
        f"intervals missing 1: {missed} of {intervals}; by chance alone a calibrated {level:.0%} interval misses "
        f"{expected:.2f} of {intervals} on average, and all {intervals} hold 1 in {all_hold:.0%} of runs"
    )


def _ratio(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


@contextlib.contextmanager
def _burning(count: int) -> Iterator[None]:
    """``count`` processes that each spin a core for as long as the block runs."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
