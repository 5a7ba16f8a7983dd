"""Device-check helpers: time one CUDA example kernel with evoteam's evaluator and with Triton's ``do_bench``
on the same inputs, and print the figures table of a device check from the JSON files it wrote.

``python -m evoteam.gpu_bench.device_compare compare [--kernel K] [--root DIR] [--json FILE]``: exit 0 when
both timings exist, 1 when the kernel failed, 2 on bad input, 3 when skipped (no GPU, no triton).
``python -m evoteam.gpu_bench.device_compare table DIR``: the table of ``DIR/bench_*.json`` (``evoteam bench
--json`` output) and ``DIR/compare.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from evoteam.gpu_bench.schema import Workload
    from evoteam.gpu_bench.task import KernelTask

SKIPPED = 3


class WorkloadTiming(BaseModel):
    uuid: str
    axes: dict[str, int]
    ours_ms: float | None
    do_bench_ms: float | None
    status: str
    launch_ms: float | None = None
    """The host time of one of our calls (its launch), which our events no longer include."""

    @property
    def ratio(self) -> float | None:
        if self.ours_ms is None or not self.do_bench_ms:
            return None
        return self.ours_ms / self.do_bench_ms


class Comparison(BaseModel):
    kernel: str
    workloads: list[WorkloadTiming]

    def ratios(self) -> list[float]:
        return [r for w in self.workloads if (r := w.ratio) is not None]


def geomean(values: Sequence[float]) -> float | None:
    if not values or any(v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


# ---- compare -------------------------------------------------------------------------------------------------------


def ours(
    kernel: str, root: Path, max_time_s: float
) -> tuple[KernelTask, list[Workload], dict[str, tuple[float | None, float | None]], dict[str, str]]:
    """The kernel's task, workloads, per-workload (median ms, launch ms) and status through the evaluator's
    worker."""
    from evoteam.gpu_bench.runner import LocalRunner
    from evoteam.gpu_bench.task import find_task
    from evoteam.gpu_bench.timing.statistics import TimingConfig
    from evoteam.gpu_bench.worker.evaluate import EvalConfig

    task = find_task(kernel, root)
    definition, workloads = task.load_definition(), task.load_workloads()
    config = EvalConfig(timing=TimingConfig(max_time_s=max_time_s))
    runner = LocalRunner()
    try:
        run = runner.run(definition, workloads, task.source_solution(definition), config, task.blob_root())
    finally:
        runner.close()
    if not run.ok:
        raise RuntimeError(f"{kernel} did not build or load: {run.load_error or run.build.log[-2000:]}")
    medians: dict[str, tuple[float | None, float | None]] = {
        r.workload.uuid: (r.outcome.timing.median_ms, r.outcome.timing.launch_ms) if r.outcome.timing else (None, None)
        for r in run.workloads
    }
    statuses = {r.workload.uuid: f"{r.outcome.status.value} {r.outcome.reason}".strip() for r in run.workloads}
    return task, workloads, medians, statuses


def do_bench_times(task: KernelTask, workloads: list[Workload], do_bench: Callable[..., Any]) -> dict[str, float]:
    """Median ms per workload from ``do_bench`` on the same built kernel (seeded inputs, as the evaluator makes)."""
    import torch

    from evoteam.gpu_bench.bindings.dtypes import torch_dtype
    from evoteam.gpu_bench.bindings.load import load_kernel
    from evoteam.gpu_bench.build.builder import build
    from evoteam.gpu_bench.verify.inputs import make_inputs

    definition = task.load_definition()
    solution = task.source_solution(definition)
    built = build(solution)
    if not built.ok or built.artifact is None:
        raise RuntimeError(f"{task.name} did not build: {built.log[-2000:]}")
    kernel = load_kernel(solution, built.artifact, definition)
    times: dict[str, float] = {}
    for workload in workloads:
        axes = definition.axis_values(workload.axes)
        inputs = make_inputs(definition, workload, 0, task.blob_root(), device="cuda")
        outputs = {
            name: torch.empty(definition.shape_of(spec, axes) or (), dtype=torch_dtype(spec.dtype), device="cuda")
            for name, spec in definition.outputs.items()
        }
        call = kernel.bind(inputs, outputs, axes)
        times[workload.uuid] = float(do_bench(call, warmup=25, rep=100, return_mode="median"))
    return times


def compare(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        print("device_compare: torch is not installed: skipped", file=sys.stderr)
        return SKIPPED
    if not torch.cuda.is_available():
        print("device_compare: no CUDA GPU: skipped", file=sys.stderr)
        return SKIPPED
    try:
        do_bench = importlib.import_module("triton.testing").do_bench
    except ImportError:
        print("device_compare: triton is not installed: skipped the do_bench comparison", file=sys.stderr)
        return SKIPPED
    from evoteam.gpu_bench.task import TaskError

    try:
        task, workloads, medians, statuses = ours(args.kernel, args.root, args.max_time)
        theirs = do_bench_times(task, workloads, do_bench)
    except TaskError as exc:
        print(f"device_compare: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"device_compare: {exc}", file=sys.stderr)
        return 1
    rows = []
    for workload in workloads:
        ours_ms, launch_ms = medians.get(workload.uuid, (None, None))
        rows.append(
            WorkloadTiming(
                uuid=workload.uuid,
                axes=workload.axes,
                ours_ms=ours_ms,
                do_bench_ms=theirs.get(workload.uuid),
                status=statuses.get(workload.uuid, ""),
                launch_ms=launch_ms,
            )
        )
    result = Comparison(kernel=args.kernel, workloads=rows)
    print(f"{'workload':<20} {'ours us':>10} {'do_bench us':>12} {'ratio':>7} {'launch us':>10}")
    for w in result.workloads:
        axes = " ".join(f"{k}={v}" for k, v in w.axes.items())
        ours_us = f"{w.ours_ms * 1e3:.2f}" if w.ours_ms is not None else w.status
        theirs_us = f"{w.do_bench_ms * 1e3:.2f}" if w.do_bench_ms is not None else "-"
        ratio = f"{w.ratio:.3f}" if w.ratio is not None else "-"
        launch_us = f"{w.launch_ms * 1e3:.2f}" if w.launch_ms is not None else "-"
        print(f"{axes:<20} {ours_us:>10} {theirs_us:>12} {ratio:>7} {launch_us:>10}")
    overall = geomean(result.ratios())
    print(f"ours / do_bench (geomean over workloads): {overall:.3f}" if overall else "ours / do_bench: -")
    if args.json:
        args.json.write_text(result.model_dump_json(indent=2))
    return 0 if len(result.ratios()) == len(workloads) else 1


# ---- table ---------------------------------------------------------------------------------------------------------


def figures_rows(folder: Path) -> list[list[str]]:
    """One row per ``bench_<kernel>.json``: kernel, workloads, median us, speedup, ours/do_bench, pass/fail."""
    comparison: Comparison | None = None
    if (folder / "compare.json").is_file():
        comparison = Comparison.model_validate_json((folder / "compare.json").read_text())
    rows = []
    for path in sorted(folder.glob("bench_*.json")):
        kernel = path.stem.removeprefix("bench_")
        try:
            payload = json.loads(path.read_text())
            workloads = payload["workloads"]
            summary = payload["summary"]
        except (OSError, ValueError, KeyError, TypeError):
            rows.append([kernel, "-", "-", "-", "-", "no result (see its log)"])
            continue
        medians = [w["timing"]["median_ms"] * 1e3 for w in workloads if w.get("timing")]
        passed = sum(1 for w in workloads if w.get("status") == "PASSED")
        speedup = summary.get("geomean_speedup")
        ratio = geomean(comparison.ratios()) if comparison is not None and comparison.kernel == kernel else None
        rows.append(
            [
                kernel,
                str(len(workloads)),
                f"{statistics.median(medians):.2f}" if medians else "-",
                f"{speedup:.2f}x" if speedup else "-",
                f"{ratio:.3f}" if ratio else "-",
                f"{passed} passed, {len(workloads) - passed} failed",
            ]
        )
    return rows


def table(args: argparse.Namespace) -> int:
    header = ["kernel", "workloads", "median us", "speedup (geomean)", "ours/do_bench", "pass/fail"]
    rows = figures_rows(args.folder)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if not rows:
        print(f"(no bench_*.json in {args.folder})")
    print("median us: the median over workloads of each workload's median; speedup: against the task's baseline")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evoteam.gpu_bench.device_compare", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="our timing vs triton.testing.do_bench on one kernel")
    c.add_argument("--kernel", default="rmsnorm_cuda")
    c.add_argument("--root", type=Path, default=Path("examples/rmsnorm"), help="folder with the evoteam.toml")
    c.add_argument("--max-time", type=float, default=1.0, help="our timing budget per workload, seconds")
    c.add_argument("--json", type=Path, help="write the comparison here")
    c.set_defaults(run=compare)
    t = sub.add_parser("table", help="the figures table of a device check's output folder")
    t.add_argument("folder", type=Path)
    t.set_defaults(run=table)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
