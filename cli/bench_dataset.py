"""``evoteam bench --dataset [DIR]``: every solution of a FlashInfer Trace dataset on every workload of its
definition, against the definition's reference, as ``flashinfer-bench run`` does; traces appended to the
dataset's ``traces/`` (or written with ``--emit-traces OUT`` as an export).

The folder is ``DIR``, else ``$FIB_DATASET_PATH``, else FlashInfer-Bench's default. Workloads over the size cap
(``--max-mb``, default from the memory the task runs in) and workloads whose safetensors blobs are missing are
left out, one line each; so are solutions evoteam cannot load, and definitions without solutions or workloads.
Exit codes: 0 every solution passed everywhere it ran, 1 one failed somewhere, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoteam.cli.bench import bench_runner, eval_config, json_error
from evoteam.gpu_bench.api import CandidateResult, Definition, Runner, Solution, Tolerance, Workload

MB = 1 << 20


@dataclass
class _Run:
    definition: Definition
    solution: Solution
    result: CandidateResult


@dataclass
class _Report:
    runs: list[_Run] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def run_dataset(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.api import (
        BenchInputError,
        DatasetError,
        ExportError,
        TaskError,
        WorkerStartError,
        dataset_path,
        load_definitions,
        select,
    )

    root = dataset_path(Path(args.dataset) if args.dataset else None)
    try:
        definitions = load_definitions(root)
        names = select(list(definitions), args.only)
        if args.max_mb is not None and not args.max_mb > 0:
            raise DatasetError(f"--max-mb must be positive, not {args.max_mb}")
        report = _bench_all(args, root, [definitions[n][0] for n in names])
    except (DatasetError, TaskError, BenchInputError, WorkerStartError, ExportError) as exc:
        print(f"evoteam bench: error: {exc}", file=sys.stderr)
        json_error(args, str(exc))
        return 2
    _show(report, root, args)
    failed = any(r.result.status.value != "PASSED" for r in report.runs)
    return 1 if failed else 0


def _bench_all(args: argparse.Namespace, root: Path, definitions: list[Definition]) -> _Report:
    from evoteam.gpu_bench.api import Evaluator, resolve_arch

    report = _Report()
    runners: dict[bool, Runner] = {}
    evaluators: dict[bool, Evaluator] = {}  # one per runner: a definition's reference is timed once for all
    try:
        for definition in definitions:
            solutions = _solutions(definition, root, report)
            if not solutions:
                continue
            workloads = _workloads(definition, root, args, solutions[0].spec.target_hardware[0], report)
            if not workloads:
                continue
            config = eval_config(args, _tolerance(definition))
            for solution in solutions:
                on_cpu = resolve_arch(solution.spec.target_hardware) is None
                if on_cpu not in runners:
                    runners[on_cpu] = bench_runner(args, on_cpu)
                    evaluators[on_cpu] = Evaluator(runners[on_cpu])
                evaluator = evaluators[on_cpu]
                result = evaluator.evaluate(
                    definition, workloads, solution, _baseline(definition, solution), config, root
                )
                report.runs.append(_Run(definition, solution, result))
                _write_traces(args, root, definition, solution, result)
                print(f"{definition.name}  {solution.name}  {_line(result)}", file=sys.stderr)
    finally:
        for runner in runners.values():
            runner.close()
    return report


def _solutions(definition: Definition, root: Path, report: _Report) -> list[Solution]:
    from evoteam.gpu_bench.api import dataset_solutions

    found = dataset_solutions(definition, root)
    if not found:
        report.left_out.append(f"definition {definition.name}: no solutions in the dataset")
    solutions = []
    for path, solution in found:
        if isinstance(solution, str):
            report.left_out.append(f"solution {path.relative_to(root)}: {solution}")
        else:
            solutions.append(solution)
    return solutions


def _workloads(
    definition: Definition, root: Path, args: argparse.Namespace, target: str, report: _Report
) -> list[Workload]:
    """The definition's workloads under the size cap (of the memory ``target`` runs in) whose blobs exist; one
    line for each other one."""
    from evoteam.gpu_bench.api import SafetensorsInput, TaskError, cap_for, dataset_workloads, workload_bytes

    try:
        workloads = dataset_workloads(definition, root)
    except TaskError as exc:
        report.left_out.append(f"definition {definition.name}: {exc}")
        return []
    if not workloads:
        report.left_out.append(f"definition {definition.name}: no workloads in the dataset")
        return []
    found = cap_for(args.max_mb, target)
    cap = found.mb if found is not None else math.inf
    kept: list[Workload] = []
    notes: list[str] = []  # one line per workload left out
    for workload in workloads:
        axes = " ".join(f"{k}={v}" for k, v in workload.axes.items())
        where = f"workload {workload.uuid} of {definition.name} ({axes})"
        try:
            size = workload_bytes(definition, definition.axis_values(workload.axes))
        except ValueError as exc:
            notes.append(f"{where}: {exc}")
            continue
        if size > cap * MB:
            notes.append(f"{where}: {size / MB:.1f} MiB of tensors, over the {cap:g} MiB cap")
            continue
        missing = sorted(
            {
                s.path
                for s in workload.inputs.values()
                if isinstance(s, SafetensorsInput) and not (root / s.path).is_file()
            }
        )
        if missing:
            notes.append(f"{where}: its safetensors blob {missing[0]} is missing")
            continue
        kept.append(workload)
    report.left_out += notes
    return kept


def _tolerance(definition: Definition) -> Tolerance:
    """FlashInfer-Bench's: atol = rtol = 1e-2, and its low-bit evaluator's matched ratio where it applies."""
    from evoteam.gpu_bench.api import matched_ratio

    return Tolerance(matched_ratio=matched_ratio(definition))


def _baseline(definition: Definition, solution: Solution) -> Solution:
    from evoteam.gpu_bench.api import reference_solution

    return reference_solution(definition, solution.spec.target_hardware[0])


def _write_traces(
    args: argparse.Namespace, root: Path, definition: Definition, solution: Solution, result: CandidateResult
) -> None:
    from evoteam.gpu_bench.api import append_traces, export_flashinfer

    if args.emit_traces:
        export_flashinfer(solution, definition, result.traces, args.emit_traces, blob_root=root)
    else:
        append_traces(root, solution, definition, result.traces)


def _line(result: CandidateResult) -> str:
    s = result.summary
    if s.geomean_speedup is not None:
        ci = f" (95% CI {s.geomean_ci[0]:.2f}-{s.geomean_ci[1]:.2f})" if s.geomean_ci else ""
        return f"{result.status.value}  geomean {s.geomean_speedup:.3f}x{ci} on {s.total} workloads"
    worst = f": {s.worst.reason[:200]}" if s.worst and s.worst.reason else ""
    return f"{result.status.value}  {s.passed}/{s.total} workloads passed{worst}"


def _show(report: _Report, root: Path, args: argparse.Namespace) -> None:
    from evoteam.gpu_bench.api import fast_p

    workloads = [w for r in report.runs for w in r.result.workloads]
    passed = [r for r in report.runs if r.result.summary.geomean_speedup is not None]
    speedups = [w.speedup for r in passed for w in r.result.workloads if w.speedup is not None]
    summary: dict[str, Any] = {
        "solutions": len(report.runs),
        "definitions": len({r.definition.name for r in report.runs}),
        "passed": len(passed),
        "workloads": len(workloads),
        "mean_speedup": sum(speedups) / len(speedups) if speedups else None,
        "geomean_speedup": math.exp(sum(math.log(v) for v in speedups) / len(speedups)) if speedups else None,
        "fast_p": fast_p(workloads),
        "left_out": len(report.left_out),
    }
    traces = str(args.emit_traces) if args.emit_traces else str(root / "traces")
    if args.json:
        payload = {
            "status": "PASSED" if len(passed) == len(report.runs) else "FAILED",
            "dataset": str(root),
            "traces": traces,
            "summary": summary,
            "results": [
                {
                    "definition": r.definition.name,
                    "solution": r.solution.name,
                    "status": r.result.status.value,
                    "summary": r.result.summary.model_dump(mode="json"),
                }
                for r in report.runs
            ],
            "left_out": report.left_out,
        }
        print(json.dumps(payload))
        return
    for line in report.left_out:
        print(f"left out: {line}")
    for r in report.runs:
        print(f"{r.definition.name}  {r.solution.name}  {_line(r.result)}")
    mean = f"{summary['mean_speedup']:.3f}x" if summary["mean_speedup"] is not None else "-"
    geo = f"{summary['geomean_speedup']:.3f}x" if summary["geomean_speedup"] is not None else "-"
    shares = " · ".join(f"{k} {v:.0%}" for k, v in summary["fast_p"].items())
    print(
        f"{summary['passed']}/{summary['solutions']} solutions passed on {summary['definitions']} definitions, "
        f"{summary['workloads']} workloads · mean speedup {mean} (FlashInfer-Bench's score) · geomean {geo} · "
        f"{shares} · {summary['left_out']} left out · traces in {traces}"
    )
