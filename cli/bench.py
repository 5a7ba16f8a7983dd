"""``evoteam bench``: evaluate one kernel (a task of evoteam.toml, or explicit files) and show the result.

Exit codes: 0 every workload passed, 1 the candidate failed somewhere (a candidate that does not build or
load is COMPILE_ERROR), 2 bad input (one error line). Under ``--json`` stdout is one JSON object in every
case: the result, or ``{"status": "ERROR", "error": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoteam.gpu_bench.api import (
    Constraints,
    Definition,
    EvalConfig,
    KernelTask,
    Runner,
    Solution,
    Tolerance,
    Workload,
)


@dataclass
class _Job:
    definition: Definition
    workloads: list[Workload]
    candidate: Solution
    baseline: Solution
    blob_root: Path | None
    tolerance: Tolerance
    constraints: Constraints | None = None


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="verify and time a kernel against its baseline",
        description="Verify and time a kernel on every workload of its definition, against a baseline.",
    )
    p.add_argument("kernel", nargs="?", help="a kernel name from evoteam.toml (searched from the current folder up)")
    p.add_argument(
        "--dataset",
        nargs="?",
        const="",
        metavar="DIR",
        help="bench every solution of a FlashInfer Trace dataset on every workload of its definition against the "
        "reference, as flashinfer-bench run does (DIR: default $FIB_DATASET_PATH); traces appended to DIR/traces",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="with --dataset: a definition name or shell pattern (repeatable; default: every definition)",
    )
    p.add_argument(
        "--max-mb",
        type=float,
        metavar="MB",
        help="with --dataset: leave out workloads whose tensors exceed MB MiB (default: 1/16 of the memory the "
        "task runs in; inf: no cap)",
    )
    p.add_argument("--definition", type=Path, help="FlashInfer-Bench definition JSON")
    p.add_argument("--workloads", type=Path, help="workloads JSONL (FlashInfer-Bench workload traces)")
    p.add_argument("--solution", type=Path, help="candidate solution JSON (with a kernel: replaces its source)")
    p.add_argument(
        "--baseline",
        help="'reference' (default without a kernel), a solution JSON, or 'compile' (an imported KernelBench "
        "task: its Model under torch.compile, KernelBench's compiled baseline)",
    )
    p.add_argument("--blobs", type=Path, help="folder that safetensors input paths are relative to")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--emit-traces", type=Path, metavar="DIR", help="write traces in FlashInfer-Bench's layout")
    p.add_argument("--trials", type=int, default=3, help="fresh-input correctness trials per workload (>= 3)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: the task's, else 1e-2)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default: the task's, else 1e-2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per workload (default 60)")
    p.add_argument("--max-time", type=float, default=2.0, help="timing budget per workload, seconds (default 2)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads the kernels may use (default: $OMP_NUM_THREADS where set, else one per CPU)",
    )
    p.add_argument("--cpus", default=None, help="CPUs the worker runs on, e.g. 0-3 (default: every CPU allowed)")
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="after a workload times out or crashes, evaluate the rest anyway (default: skip them)",
    )
    p.add_argument(
        "--no-isolate",
        action="store_true",
        help="call C ABI and Python kernels on the CPU in the worker's own process (default: each in a native or "
        "Python host process of its own, which the verdict's code never shares; see docs/evaluator.md)",
    )
    p.add_argument(
        "--flush",
        choices=["operands", "buffer", "none"],
        default="operands",
        help="before each timed sample: evict the kernel's buffers from the caches (default), write a buffer "
        "of twice the last-level cache, or nothing",
    )
    p.add_argument("--gpu", type=int, default=0, help="the GPU index a CUDA kernel runs on (default 0)")
    p.add_argument(
        "--runner",
        default="local",
        help="where the worker runs: local (default), ssh://user@host[:port] (evoteam installed there), "
        "ray (a cluster on this machine or the running one) or ray://ADDRESS",
    )
    p.add_argument(
        "--memory-limit-mb",
        type=int,
        help="address-space limit of the worker process (default on CPU: 75%% of this machine's memory)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.api import BenchInputError, TaskError, WorkerStartError

    if args.dataset is not None:
        from evoteam.cli.bench_dataset import run_dataset

        return run_dataset(args)
    try:
        job = _job(args)
        return _bench(job, args)
    except (TaskError, BenchInputError, WorkerStartError) as exc:
        print(f"evoteam bench: error: {exc}", file=sys.stderr)
        json_error(args, str(exc))
        return 2
    except KeyboardInterrupt:
        print("evoteam bench: interrupted", file=sys.stderr)
        json_error(args, "interrupted")
        return 130


def json_error(args: argparse.Namespace, message: str) -> None:
    """Under ``--json`` stdout holds one JSON object whatever happens: on an error, its status and message."""
    if getattr(args, "json", False):
        print(json.dumps({"status": "ERROR", "error": message}))


def _job(args: argparse.Namespace) -> _Job:
    from evoteam.gpu_bench.api import (
        ExportError,
        TaskError,
        check_exportable,
        dataset_root,
        find_task,
        load_definition,
        load_solution,
        load_workloads,
        reference_solution,
        to_flashinfer_solution,
    )

    if args.trials < 3:
        raise TaskError("--trials must be at least 3")
    if args.kernel:
        task = find_task(args.kernel, Path.cwd())
        definition = load_definition(args.definition) if args.definition else task.load_definition()
        workloads = load_workloads(args.workloads) if args.workloads else task.load_workloads()
        candidate = load_solution(args.solution) if args.solution else task.source_solution(definition)
        if args.baseline == "reference":
            baseline = reference_solution(definition, task.target)
        elif args.baseline == "compile":
            baseline = _compiled(task, definition)
        elif args.baseline:
            baseline = load_solution(Path(args.baseline))
        else:
            baseline = task.baseline_solution(definition)
        blobs = args.blobs or task.blob_root()
        tolerance = task.tolerance
        constraints: Constraints | None = task.constraints
    else:
        missing = [f"--{n}" for n in ("definition", "workloads", "solution") if getattr(args, n) is None]
        if missing:
            raise TaskError(f"name a kernel from evoteam.toml, or give {' '.join(missing)}")
        definition = load_definition(args.definition)
        workloads = load_workloads(args.workloads)
        candidate = load_solution(args.solution)
        if args.baseline == "compile":
            raise TaskError("--baseline compile needs a kernel name (an imported KernelBench task)")
        if args.baseline and args.baseline != "reference":
            baseline = load_solution(Path(args.baseline))
        else:
            baseline = reference_solution(definition, candidate.spec.target_hardware[0])
        blobs = args.blobs or dataset_root(args.workloads)
        tolerance = Tolerance()
        constraints = None
    if candidate.definition != definition.name:
        raise TaskError(
            f"solution {candidate.name!r} is for definition {candidate.definition!r}, not {definition.name!r}"
        )
    if args.emit_traces:  # refused before anything runs, as evoteam export does
        try:
            to_flashinfer_solution(candidate, definition)
            check_exportable(definition, workloads)
        except ExportError as exc:
            raise TaskError(f"--emit-traces: {exc}") from None
    return _Job(
        definition,
        workloads,
        candidate,
        baseline,
        blobs,
        tolerance.model_copy(update={k: getattr(args, k) for k in ("atol", "rtol") if getattr(args, k) is not None}),
        constraints,
    )


def _compiled(task: KernelTask, definition: Definition) -> Solution:
    from evoteam.gpu_bench.api import KernelBenchError, TaskError, compiled_baseline

    try:
        return compiled_baseline(task, definition)
    except KernelBenchError as exc:
        raise TaskError(str(exc)) from None


def eval_config(args: argparse.Namespace, tolerance: Tolerance) -> EvalConfig:
    """The evaluation settings of the command line, with ``tolerance``."""
    from evoteam.gpu_bench.api import EvalConfig, TimingConfig

    return EvalConfig(
        trials=args.trials,
        **tolerance.model_dump(),
        timeout_s=args.timeout,
        keep_going=args.keep_going,
        isolate=not args.no_isolate,
        timing=TimingConfig(
            max_time_s=args.max_time,
            flush_cache=args.flush != "none",
            flush_method="buffer" if args.flush == "buffer" else "operands",
        ),
    )


def bench_runner(args: argparse.Namespace, on_cpu: bool) -> Runner:
    """The runner of the command line for a CPU kernel (``on_cpu``, ``resolve_arch``'s rule) or a GPU one."""
    from evoteam.gpu_bench.api import (
        BenchInputError,
        default_memory_limit_mb,
        make_runner,
        parse_cpus,
        parse_runner,
        thread_policy,
    )

    limit = args.memory_limit_mb
    local = parse_runner(args.runner).kind == "local"
    if limit is None and on_cpu and local:  # another host's memory is its runner's business
        limit = default_memory_limit_mb()
    # a GPU worker owns one GPU and has no address-space limit (CUDA reserves vast virtual memory)
    threads = None
    if args.threads is not None or args.cpus is not None:
        try:
            threads = thread_policy(args.threads, parse_cpus(args.cpus) if args.cpus else None)
        except ValueError as exc:
            raise BenchInputError(f"--threads/--cpus: {exc}") from None
    return make_runner(args.runner, memory_limit_mb=limit or None, gpu=None if on_cpu else args.gpu, threads=threads)


def _bench(job: _Job, args: argparse.Namespace) -> int:
    from evoteam.cli.render import Reporter
    from evoteam.gpu_bench.api import EvaluationStatus, Evaluator, export_flashinfer, resolve_arch

    config = eval_config(args, job.tolerance)
    reporter = Reporter(enabled=True, total=2 * len(job.workloads))  # stderr: --json's stdout stays clean
    runner = bench_runner(args, on_cpu=resolve_arch(job.candidate.spec.target_hardware) is None)
    try:
        with reporter:
            evaluator = Evaluator(runner)
            reporter.phase(f"baseline {job.baseline.name}")
            evaluator.baseline_run(
                job.definition, job.workloads, job.baseline, config, job.blob_root, progress=reporter.workload_done
            )
            reporter.phase(f"candidate {job.candidate.name}")
            result = evaluator.evaluate(
                job.definition,
                job.workloads,
                job.candidate,
                job.baseline,
                config,
                job.blob_root,
                progress=reporter.workload_done,
                constraints=job.constraints,
            )
    finally:
        runner.close()
    if args.emit_traces:  # as evoteam export writes them: a binding flashinfer-bench accepts, blobs copied
        export_flashinfer(job.candidate, job.definition, result.traces, args.emit_traces, blob_root=job.blob_root)
    if args.json:
        payload = {
            "status": result.status.value,
            "summary": result.summary.model_dump(mode="json"),
            "traces": [t.to_json_dict() for t in result.traces],
            "workloads": [w.model_dump(mode="json") for w in result.workloads],
            "resources": [r.model_dump(mode="json") for r in result.resources],
            "violations": result.violations,
            "diagnostics": [d.model_dump(mode="json") for d in result.build.diagnostics],
        }
        if result.load_error:
            payload["error"] = f"solution {job.candidate.name!r} does not load: {result.load_error}"
        print(json.dumps(payload))
    else:
        reporter.show(result, job.definition)
    return 0 if result.status == EvaluationStatus.PASSED else 1
