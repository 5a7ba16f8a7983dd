"""Evaluator throughput and timing stability, printed side by side in one run.

Two measurements, both through the public evaluator API (``Evaluator`` over a ``LocalRunner``):

1. Candidates evaluated per minute on one list of candidates and one ``EvalConfig``, in two modes:
   *warm* (one ``LocalRunner`` reused for every candidate, with a build cache in a temporary folder that
   lives for the whole run) and *fresh* (``LocalRunner(fresh=True)``: a new worker process with an empty
   build cache for every solution, what a harness without a warm worker and cache pays). The list holds
   distinct variants of the task's kernel (each needs its own build) followed by resubmissions of variants
   already seen (identical code, as agents often resubmit), so the build cache shows.
2. Run-to-run stability: one kernel evaluated ``--repeats`` times, each time by a new ``Evaluator`` (so the
   baseline is timed again too) over one warm runner; per workload, the coefficient of variation
   (sample std / mean) of the candidate's median latency, of the baseline's, and of the speedup.

It is a benchmark, not a test: it prints figures and exits 0 unless an evaluation fails.
Run from the repository root: ``python benchmarks/evaluator_throughput.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import (
    CandidateResult,
    Definition,
    EvalConfig,
    EvaluationStatus,
    Evaluator,
    KernelTask,
    LocalRunner,
    Solution,
    TimingConfig,
    Workload,
    WorkloadResult,
    cpu_name,
    find_task,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXAMPLE = REPO_ROOT / "examples" / "rmsnorm"


@dataclass
class Inputs:
    """Everything one evaluation needs, loaded once from a task."""

    task: KernelTask
    definition: Definition
    workloads: list[Workload]
    source: Solution
    baseline: Solution
    blob_root: Path


@dataclass
class Timed:
    """One candidate's evaluation and the wall time the caller waited for it."""

    name: str
    repeat_of: str | None
    seconds: float
    result: CandidateResult


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--root", type=Path, default=DEFAULT_EXAMPLE, help="folder holding evoteam.toml")
    p.add_argument("--task", default="rmsnorm", help="kernel task for the throughput comparison")
    p.add_argument("--cv-task", default="rmsnorm_tuned", help="kernel task for the repeatability measurement")
    p.add_argument("--candidates", type=int, default=8, help="candidates per mode, resubmissions included")
    p.add_argument("--distinct", type=int, default=4, help="distinct variants among the candidates")
    p.add_argument("--workloads", type=int, default=3, help="the first N workloads of the task's file")
    p.add_argument("--warmup-s", type=float, default=0.01, help="throughput timing: warm-up seconds")
    p.add_argument("--max-time-s", type=float, default=0.05, help="throughput timing: max sampling seconds")
    p.add_argument("--max-samples", type=int, default=50, help="throughput timing: max samples")
    p.add_argument("--repeats", type=int, default=10, help="evaluations of the repeatability kernel")
    p.add_argument(
        "--cv-max-time-s",
        type=float,
        default=None,
        help="repeatability timing: max sampling seconds (default: TimingConfig's own default)",
    )
    p.add_argument("--skip-throughput", action="store_true", help="only the repeatability measurement")
    p.add_argument("--skip-cv", action="store_true", help="only the throughput comparison")
    args = p.parse_args(argv)
    if not 1 <= args.distinct <= args.candidates:
        p.error("--distinct must be between 1 and --candidates")
    if args.repeats < 2:
        p.error("--repeats must be at least 2 for a standard deviation")
    return args


def load_inputs(name: str, root: Path, n_workloads: int) -> Inputs:
    task = find_task(name, root)
    definition = task.load_definition()
    workloads = task.load_workloads()[:n_workloads]
    return Inputs(
        task=task,
        definition=definition,
        workloads=workloads,
        source=task.source_solution(definition),
        baseline=task.baseline_solution(definition),
        blob_root=task.blob_root(),
    )


def variant(source: Solution, index: int, name: str) -> Solution:
    """``source`` with a trailing comment in its first file: same kernel, a different build key."""
    first = source.sources[0]
    changed = first.model_copy(update={"content": f"{first.content}\n// variant {index}\n"})
    return source.model_copy(update={"name": name, "sources": [changed, *source.sources[1:]]})


def candidate_list(source: Solution, total: int, distinct: int) -> list[tuple[Solution, str | None]]:
    """``distinct`` variants, then resubmissions of them in turn, each with its own name."""
    variants = [variant(source, i, f"{source.name}_v{i}") for i in range(distinct)]
    out: list[tuple[Solution, str | None]] = [(v, None) for v in variants]
    for k in range(total - distinct):
        original = variants[k % distinct]
        out.append((original.model_copy(update={"name": f"{original.name}_resubmit{k}"}), original.name))
    return out


def timed_baseline(evaluator: Evaluator, inputs: Inputs, config: EvalConfig) -> float:
    """Runs the baseline once (the Evaluator caches it for every later candidate); its wall seconds."""
    start = time.perf_counter()
    evaluator.baseline_run(inputs.definition, inputs.workloads, inputs.baseline, config, inputs.blob_root)
    return time.perf_counter() - start


def timed_candidate(
    evaluator: Evaluator, inputs: Inputs, solution: Solution, repeat_of: str | None, config: EvalConfig
) -> Timed:
    start = time.perf_counter()
    result = evaluator.evaluate(
        inputs.definition, inputs.workloads, solution, inputs.baseline, config, inputs.blob_root
    )
    return Timed(solution.name, repeat_of, time.perf_counter() - start, result)


def failures(timed: list[Timed]) -> list[str]:
    out = []
    for t in timed:
        r = t.result
        if r.status != EvaluationStatus.PASSED:
            detail = r.load_error or (r.build.log[-300:] if not r.build.ok else "")
            if not detail and r.summary.worst is not None:
                detail = r.summary.worst.reason
            out.append(f"{t.name}: {r.status.value} {detail}")
    return out


def per_minute(timed: list[Timed]) -> float:
    total = sum(t.seconds for t in timed)
    return 60.0 * len(timed) / total if total > 0 else float("inf")


def throughput(console: Console, args: argparse.Namespace) -> bool:
    inputs = load_inputs(args.task, args.root, args.workloads)
    timing = TimingConfig(warmup_s=args.warmup_s, max_time_s=args.max_time_s, max_samples=args.max_samples)
    config = EvalConfig(atol=inputs.task.tolerance.atol, rtol=inputs.task.tolerance.rtol, timing=timing)
    candidates = candidate_list(inputs.source, args.candidates, args.distinct)

    console.rule(f"1. Candidates per minute: warm worker + build cache vs fresh process, task {args.task!r}")
    console.print(f"baseline: {inputs.baseline.name} ({inputs.baseline.spec.language.value})")
    console.print(f"workloads ({len(inputs.workloads)}): " + ", ".join(_axes(w) for w in inputs.workloads))
    console.print(
        f"candidates: {len(candidates)} ({args.distinct} distinct variants, "
        f"{len(candidates) - args.distinct} resubmissions of identical code)"
    )
    console.print(f"EvalConfig: {config.model_dump_json()}", soft_wrap=True)
    console.print("order: both baselines, then each candidate warm then fresh (alternating)")

    # The two modes alternate candidate by candidate, so both see the same load from other processes.
    cache = Path(tempfile.mkdtemp(prefix="evoteam-bench-cache-"))
    warm_runner = LocalRunner(cache_root=cache)
    fresh_runner = LocalRunner(fresh=True)
    warm: list[Timed] = []
    fresh: list[Timed] = []
    try:
        warm_eval, fresh_eval = Evaluator(warm_runner), Evaluator(fresh_runner)
        warm_base_s = timed_baseline(warm_eval, inputs, config)
        fresh_base_s = timed_baseline(fresh_eval, inputs, config)
        for solution, repeat_of in candidates:
            warm.append(timed_candidate(warm_eval, inputs, solution, repeat_of, config))
            fresh.append(timed_candidate(fresh_eval, inputs, solution, repeat_of, config))
        warm_starts = warm_runner.worker_starts
        fresh_starts = fresh_runner.worker_starts
    finally:
        warm_runner.close()
        fresh_runner.close()
        shutil.rmtree(cache, ignore_errors=True)

    per = Table(title="per candidate (wall seconds the caller waited)")
    per.add_column("candidate")
    per.add_column("same code as")
    per.add_column("warm s", justify="right")
    per.add_column("warm build", justify="right")
    per.add_column("fresh s", justify="right")
    per.add_column("fresh build", justify="right")
    per.add_column("geomean speedup", justify="right")
    for w, f in zip(warm, fresh, strict=True):
        per.add_row(
            w.name,
            w.repeat_of or "-",
            f"{w.seconds:.2f}",
            _build(w.result),
            f"{f.seconds:.2f}",
            _build(f.result),
            _speedup(w.result.summary.geomean_speedup),
        )
    console.print(per)

    warm_rate, fresh_rate = per_minute(warm), per_minute(fresh)
    distinct_n = args.distinct
    summary = Table(title="candidates per minute (baseline run excluded; it is timed once per Evaluator)")
    summary.add_column("")
    summary.add_column("warm worker + cache", justify="right")
    summary.add_column("fresh process, no cache", justify="right")
    summary.add_column("warm / fresh", justify="right")
    summary.add_row(
        "all candidates / min",
        f"{warm_rate:.1f}",
        f"{fresh_rate:.1f}",
        f"{warm_rate / fresh_rate:.1f}x",
    )
    for label, part in (
        ("distinct only / min", slice(0, distinct_n)),
        ("resubmissions / min", slice(distinct_n, None)),
    ):
        if warm[part]:
            a, b = per_minute(warm[part]), per_minute(fresh[part])
            summary.add_row(label, f"{a:.1f}", f"{b:.1f}", f"{a / b:.1f}x")
    summary.add_row(
        "total candidate seconds",
        f"{sum(t.seconds for t in warm):.2f}",
        f"{sum(t.seconds for t in fresh):.2f}",
        "",
    )
    summary.add_row("baseline run seconds", f"{warm_base_s:.2f}", f"{fresh_base_s:.2f}", "")
    summary.add_row("worker processes started", str(warm_starts), str(fresh_starts), "")
    console.print(summary)
    goal = "met" if warm_rate / fresh_rate >= 10 else "NOT met"
    console.print(f"goal warm/fresh >= 10x: {goal} ({warm_rate / fresh_rate:.1f}x on this candidate mix)")

    bad = failures(warm) + failures(fresh)
    for line in bad:
        console.print(f"[red]FAILED[/red] {line}")
    return not bad


def repeatability(console: Console, args: argparse.Namespace) -> bool:
    inputs = load_inputs(args.cv_task, args.root, args.workloads)
    default = TimingConfig()
    timing = default if args.cv_max_time_s is None else TimingConfig(max_time_s=args.cv_max_time_s)
    config = EvalConfig(atol=inputs.task.tolerance.atol, rtol=inputs.task.tolerance.rtol, timing=timing)

    console.rule(f"2. Repeatability: {args.repeats} evaluations of task {args.cv_task!r}")
    console.print(f"candidate: {inputs.source.name}; baseline: {inputs.baseline.name}")
    changed = "" if args.cv_max_time_s is None else f" (max_time_s lowered from the default {default.max_time_s:g})"
    console.print(f"TimingConfig: {timing.model_dump_json()}{changed}", soft_wrap=True)
    console.print("each repeat uses a new Evaluator on one warm runner, so the baseline is timed again too")

    cache = Path(tempfile.mkdtemp(prefix="evoteam-bench-cache-"))
    runner = LocalRunner(cache_root=cache)
    results: list[CandidateResult] = []
    start = time.perf_counter()
    try:
        for _ in range(args.repeats):
            evaluator = Evaluator(runner)
            results.append(
                evaluator.evaluate(
                    inputs.definition,
                    inputs.workloads,
                    inputs.source,
                    inputs.baseline,
                    config,
                    inputs.blob_root,
                )
            )
    finally:
        runner.close()
        shutil.rmtree(cache, ignore_errors=True)
    elapsed = time.perf_counter() - start

    bad = [f"repeat {i}: {r.status.value}" for i, r in enumerate(results) if r.status != EvaluationStatus.PASSED]
    for line in bad:
        console.print(f"[red]FAILED[/red] {line}")
    if bad:
        return False

    table = Table(title=f"coefficient of variation over {args.repeats} evaluations (sample std / mean)")
    for name in (
        "workload",
        "mean median ms",
        "CV latency",
        "mean baseline ms",
        "CV baseline latency",
        "mean speedup",
        "CV speedup",
        "samples (min-max)",
    ):
        table.add_column(name, justify="left" if name == "workload" else "right")
    for i, workload in enumerate(inputs.workloads):
        rows = [r.workloads[i] for r in results]
        lat = [w.timing.median_ms for w in rows if w.timing is not None]
        base = [w.baseline_timing.median_ms for w in rows if w.baseline_timing is not None]
        speed = [w.speedup for w in rows if w.speedup is not None]
        samples = [w.timing.n for w in rows if w.timing is not None]
        table.add_row(
            _axes(workload),
            f"{statistics.mean(lat):.4f}",
            _cv(lat),
            f"{statistics.mean(base):.4f}",
            _cv(base),
            f"{statistics.mean(speed):.3f}",
            _cv(speed),
            f"{min(samples)}-{max(samples)}",
        )
    raw = Table(title="each evaluation: candidate median ms / baseline median ms / speedup")
    raw.add_column("repeat", justify="right")
    for workload in inputs.workloads:
        raw.add_column(_axes(workload), justify="right")
    for n, r in enumerate(results, 1):
        raw.add_row(str(n), *(_triple(w) for w in r.workloads))
    console.print(raw)
    geo = [r.summary.geomean_speedup for r in results if r.summary.geomean_speedup is not None]
    table.add_row("geomean", "", "", "", "", f"{statistics.mean(geo):.3f}", _cv(geo), "")
    console.print(table)
    console.print(f"{args.repeats} evaluations took {elapsed:.1f} s")
    return True


def _cv(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    mean = statistics.mean(values)
    return f"{100 * statistics.stdev(values) / mean:.2f}%" if mean else "n/a"


def _triple(w: WorkloadResult) -> str:
    cand = f"{w.timing.median_ms:.4f}" if w.timing else "-"
    base = f"{w.baseline_timing.median_ms:.4f}" if w.baseline_timing else "-"
    return f"{cand} / {base} / {_speedup(w.speedup)}"


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return f"load average (1/5/15 min): {one:.2f} {five:.2f} {fifteen:.2f}"


def _axes(workload: Workload) -> str:
    return ",".join(f"{k}={v}" for k, v in workload.axes.items())


def _build(result: CandidateResult) -> str:
    b = result.build
    return f"cached {b.seconds:.2f}" if b.cached else f"built {b.seconds:.2f}"


def _speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(width=130, highlight=False)
    console.print(f"command: {shlex.join(['python', *sys.argv])}", soft_wrap=True)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    console.print(
        f"machine: {cpu_name()}; {os.cpu_count()} logical cores ({usable} usable); "
        f"Python {platform.python_version()}; {platform.system()} {platform.release()}"
    )
    console.print(f"{_load()} (other processes on this machine compete for its cores)")
    ok = True
    start = time.perf_counter()
    if not args.skip_throughput:
        ok = throughput(console, args) and ok
        console.print(_load())
    if not args.skip_cv:
        ok = repeatability(console, args) and ok
        console.print(_load())
    console.print(f"total wall time: {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
