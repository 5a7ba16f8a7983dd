"""Our evaluator's timing next to Kernel Tuner's C backend: one CPU kernel, one size, repeated measurements.

The kernel is ``examples/rmsnorm/kernels/rmsnorm.cpp`` (task ``rmsnorm``: bf16 rows of 4096, g++ ``-O3
-march=native``) on ``--size`` rows. Each side measures it ``--repeats`` times, the sides interleaved repeat by
repeat so they see the same load:

- *evoteam*: one measurement is one ``Evaluator.evaluate`` over a ``LocalRunner`` on one workload, as ``evoteam
  bench`` does (build, 3 verification trials, warm-up, samples to a 1% half-width of the median or 2 s); the
  figure is the reported median. Twice: with the default operand cache flush, and with ``flush_cache=False``
  (``--flush none``), which is what Kernel Tuner does. Each has its own worker and build cache; the baseline
  (the PyTorch reference) is timed once before the repeats, as ``evoteam bench`` does before the candidate.
- *Kernel Tuner*: one measurement is one ``tune_kernel(..., lang="C")`` of that one configuration, in this
  process. Kernel Tuner's C backend does not time anything itself: it reads the C function's ``float`` return
  value as milliseconds, so the kernel gets a wrapper that calls it between two ``clock_gettime`` calls. The
  figure is Kernel Tuner's ``time``: the mean of ``iterations`` (default 7) such calls, after its own warm-up
  (one discarded compile-and-benchmark of the same configuration).

Per side: median of the measurements, their coefficient of variation (sample std / mean) and the first-run
bias (first measurement / median of the others - 1). Also the per-call overhead that only evoteam's figure
contains (a Python closure and a ctypes call inside the timed region), measured on an empty C function.

It is a benchmark, not a test: it prints figures and exits 0 unless a measurement fails or a kernel's output
is wrong. Run from the repository root: ``python benchmarks/evaluator_vs_kernel_tuner.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch
from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import (
    CKernel,
    Definition,
    EvalConfig,
    EvaluationStatus,
    Evaluator,
    KernelTask,
    LocalRunner,
    RandomInput,
    Solution,
    TimingConfig,
    Workload,
    cpu_name,
    default_memory_limit_mb,
    find_task,
    time_call,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = REPO_ROOT / "examples" / "rmsnorm"
TASK = "rmsnorm"
HIDDEN = 4096
KT_ENTRY = "rmsnorm_timed"
OURS, OURS_NO_FLUSH, KT = "evoteam", "evoteam --flush none", "Kernel Tuner C"
T = TypeVar("T")

# Appended to the kernel for Kernel Tuner, whose C backend takes the returned float as the run time in ms.
# The call goes through a volatile pointer so that g++ cannot inline the kernel into the timed region.
TIMED_WRAPPER = r"""
#include <ctime>
static int (*volatile evoteam_timed_kernel)(const uint16_t*, const uint16_t*, uint16_t*, int64_t) = rmsnorm;
extern "C" float rmsnorm_timed(const uint16_t* hidden_states, const uint16_t* weight, uint16_t* output,
                               int64_t batch_size) {
  timespec start, stop;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const int rc = evoteam_timed_kernel(hidden_states, weight, output, batch_size);
  clock_gettime(CLOCK_MONOTONIC, &stop);
  if (rc != 0) return -1.0f;
  return static_cast<float>((stop.tv_sec - start.tv_sec) * 1e3 + (stop.tv_nsec - start.tv_nsec) * 1e-6);
}
"""

# The kernel's signature with an empty body: what evoteam's timed region costs besides the kernel.
EMPTY_KERNEL = """#include <cstdint>
extern "C" int rmsnorm(const uint16_t*, const uint16_t*, uint16_t*, int64_t) { return 0; }
"""


@dataclass
class Series:
    """One side's repeated measurements of the same kernel on the same size."""

    name: str
    ms: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    """evoteam: timed samples behind each median; Kernel Tuner: iterations averaged."""
    inner_first: list[float] = field(default_factory=list)
    """Kernel Tuner only: per measurement, its first iteration / median of its other iterations - 1."""
    inner_median: list[float] = field(default_factory=list)
    """Kernel Tuner only: per measurement, the median of its iterations (it reports their mean)."""


@dataclass
class Ours:
    """What evoteam's measurements need, loaded once."""

    task: KernelTask
    definition: Definition
    workload: Workload
    candidate: Solution
    baseline: Solution
    blob_root: Path


def load_ours(size: int, root: Path = EXAMPLE) -> Ours:
    task = find_task(TASK, root)
    definition = task.load_definition()
    inputs = {name: RandomInput() for name in definition.inputs}
    workload = Workload(uuid=f"evaluator-vs-kernel-tuner-{size}", axes={"batch_size": size}, inputs=inputs)
    return Ours(
        task=task,
        definition=definition,
        workload=workload,
        candidate=task.source_solution(definition),
        baseline=task.baseline_solution(definition),
        blob_root=task.blob_root(),
    )


def eval_config(ours: Ours, timing: TimingConfig) -> EvalConfig:
    return EvalConfig(atol=ours.task.tolerance.atol, rtol=ours.task.tolerance.rtol, timing=timing)


def measure_ours(evaluator: Evaluator, ours: Ours, config: EvalConfig) -> tuple[float, int]:
    """One evaluation of the candidate: its median latency in ms and the samples behind it."""
    result = evaluator.evaluate(ours.definition, [ours.workload], ours.candidate, ours.baseline, config, ours.blob_root)
    done = result.workloads[0]
    if result.status != EvaluationStatus.PASSED or done.timing is None:
        detail = result.load_error or done.reason or result.build.log[-300:]
        raise RuntimeError(f"evoteam's evaluation did not pass: {result.status.value} {detail}")
    return done.timing.median_ms, done.timing.n


@dataclass
class KtInputs:
    """Kernel Tuner's arguments: bf16 as raw 16-bit words, like evoteam's C binding passes them."""

    hidden_states: npt.NDArray[np.uint16]
    weight: npt.NDArray[np.uint16]
    output: npt.NDArray[np.uint16]
    size: int

    @classmethod
    def random(cls, size: int, seed: int = 0) -> KtInputs:
        rng = np.random.default_rng(seed)
        x = _to_bf16(rng.standard_normal((size, HIDDEN), dtype=np.float32))
        w = _to_bf16(rng.standard_normal(HIDDEN, dtype=np.float32))
        return cls(x, w, np.zeros((size, HIDDEN), dtype=np.uint16), size)

    def wrong_elements(self, atol: float, rtol: float) -> int:
        """Output elements that are not finite or are off a float32 reference by more than ``atol`` and more
        than ``rtol * |ref|`` (the evaluator's rule)."""
        x = _from_bf16(self.hidden_states)
        ref = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * _from_bf16(self.weight)
        out = _from_bf16(self.output)
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(out - ref)
            wrong = ~np.isfinite(out) | ((error > atol) & (error > rtol * np.abs(ref)))
        return int(np.count_nonzero(wrong))


def measure_kernel_tuner(
    source: str, inputs: KtInputs, flags: list[str], iterations: int, tolerance: tuple[float, float] = (1e-2, 1e-2)
) -> tuple[float, list[float]]:
    """One ``tune_kernel`` of the single configuration: Kernel Tuner's ``time`` (ms) and its iterations."""
    from kernel_tuner import tune_kernel  # type: ignore[import-untyped]

    inputs.output[:] = 0
    args = [inputs.hidden_states, inputs.weight, inputs.output, np.int64(inputs.size)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it warns that a C function has no thread block dimensions
        results, _ = tune_kernel(
            KT_ENTRY, source + TIMED_WRAPPER, (inputs.size,), args, {"block_size_x": [1]}, lang="C",
            compiler_options=flags, iterations=iterations, quiet=True,
        )  # fmt: skip
    if len(results) != 1 or not isinstance(results[0].get("time"), float) or min(results[0]["times"]) < 0:
        raise RuntimeError(f"Kernel Tuner returned no time: {results}")
    wrong = inputs.wrong_elements(*tolerance)
    if wrong:
        raise RuntimeError(f"under Kernel Tuner, {wrong} output elements differ from the numpy reference")
    return float(results[0]["time"]), [float(t) for t in results[0]["times"]]


def call_overhead_us(definition: Definition, size: int, flags: list[str], folder: Path) -> float:
    """Median µs of evoteam's timed region around an empty C function with the kernel's signature and binding."""
    source, library = folder / "empty.cc", folder / "empty.so"
    source.write_text(EMPTY_KERNEL)
    subprocess.run(["g++", "-shared", "-fPIC", *flags, str(source), "-o", str(library)], check=True)
    kernel = CKernel(str(library), TASK, definition)
    inputs = {
        "hidden_states": torch.zeros(size, HIDDEN, dtype=torch.bfloat16),
        "weight": torch.zeros(HIDDEN, dtype=torch.bfloat16),
    }
    outputs = {"output": torch.zeros(size, HIDDEN, dtype=torch.bfloat16)}
    call = kernel.bind(inputs, outputs, {"batch_size": size})

    def timed() -> None:  # the evaluator wraps the bound call the same way
        call()

    config = TimingConfig(min_samples=1000, max_samples=5000, max_time_s=0.5, flush_cache=False)
    return 1000 * time_call(timed, config).median_ms


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeats", type=int, default=10, help="measurements per side (default 10)")
    p.add_argument("--size", type=int, default=34, help="batch_size: rows of 4096 bf16 values (default 34)")
    p.add_argument("--kt-iterations", type=int, default=7, help="Kernel Tuner's iterations (default: its own, 7)")
    p.add_argument("--max-time-s", type=float, default=None, help="evoteam's max_time_s (default: TimingConfig's)")
    args = p.parse_args(argv)
    if args.repeats < 3:
        p.error("--repeats must be at least 3 (a first run and a spread of the others)")
    if args.size < 1:
        p.error("--size must be at least 1")
    return args


def run_all(args: argparse.Namespace, console: Console) -> list[Series]:
    ours = load_ours(args.size)
    default = TimingConfig() if args.max_time_s is None else TimingConfig(max_time_s=args.max_time_s)
    configs = {
        OURS: eval_config(ours, default),
        OURS_NO_FLUSH: eval_config(ours, default.model_copy(update={"flush_cache": False})),
    }
    flags = ours.task.flags or ["-O3"]
    source = ours.task.source.read_text()
    tolerance = (ours.task.tolerance.atol, ours.task.tolerance.rtol)
    kt_inputs = KtInputs.random(args.size)
    console.print(f"evoteam TimingConfig: {default.model_dump_json()} (second column: flush_cache=false)")
    console.print(f"g++ flags (both sides): {' '.join(flags)}; Kernel Tuner iterations: {args.kt_iterations}")

    series = {name: Series(name) for name in (OURS, OURS_NO_FLUSH, KT)}
    caches = {name: Path(tempfile.mkdtemp(prefix="evoteam-bench-cache-")) for name in configs}
    limit = default_memory_limit_mb()
    runners = {name: LocalRunner(cache_root=caches[name], memory_limit_mb=limit) for name in configs}
    try:
        evaluators = {name: Evaluator(runner) for name, runner in runners.items()}
        for name, evaluator in evaluators.items():  # as `evoteam bench` does before the candidate
            evaluator.baseline_run(ours.definition, [ours.workload], ours.baseline, configs[name], ours.blob_root)
        for _ in range(args.repeats):
            for name, evaluator in evaluators.items():
                ms, n = _timed(functools.partial(measure_ours, evaluator, ours, configs[name]), series[name])
                series[name].ms.append(ms)
                series[name].samples.append(n)
            kt = series[KT]
            ms, times = _timed(
                lambda: measure_kernel_tuner(source, kt_inputs, flags, args.kt_iterations, tolerance), kt
            )
            kt.ms.append(ms)
            kt.samples.append(len(times))
            kt.inner_first.append(times[0] / statistics.median(times[1:]) - 1 if len(times) > 1 else 0.0)
            kt.inner_median.append(statistics.median(times))
    finally:
        for runner in runners.values():
            runner.close()
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="evoteam-bench-empty-") as tmp:
        overhead = call_overhead_us(ours.definition, args.size, flags, Path(tmp))
    console.print(
        f"evoteam's timed region around an empty C function (closure + ctypes call): {overhead:.2f} µs median; "
        "Kernel Tuner's figure has no such overhead (the wrapper reads the clock inside C)"
    )
    return list(series.values())


def _timed(measure: Callable[[], T], into: Series) -> T:
    start = time.perf_counter()
    value = measure()
    into.wall_s.append(time.perf_counter() - start)
    return value


def first_run_bias(values: list[float]) -> float:
    """First measurement / median of the others - 1."""
    return values[0] / statistics.median(values[1:]) - 1


def cv(values: list[float]) -> float:
    """Sample standard deviation / mean."""
    return statistics.stdev(values) / statistics.mean(values)


def report(console: Console, all_series: list[Series]) -> None:
    raw = Table(title="each measurement: ms (evoteam: median of n samples; Kernel Tuner: mean of its iterations)")
    raw.add_column("repeat", justify="right")
    for s in all_series:
        raw.add_column(s.name, justify="right")
    for i in range(len(all_series[0].ms)):
        raw.add_row(str(i + 1), *(f"{s.ms[i]:.4f} (n={s.samples[i]})" for s in all_series))
    console.print(raw)

    table = Table(title=f"{len(all_series[0].ms)} measurements of the same kernel on the same input size, per side")
    table.add_column("")
    for s in all_series:
        table.add_column(s.name, justify="right")
    rows: list[tuple[str, Callable[[Series], str]]] = [
        ("median ms", lambda s: f"{statistics.median(s.ms):.4f}"),
        ("min - max ms", lambda s: f"{min(s.ms):.4f} - {max(s.ms):.4f}"),
        ("CV (std / mean)", lambda s: f"{100 * cv(s.ms):.2f}%"),
        ("first-run bias", lambda s: f"{100 * first_run_bias(s.ms):+.1f}%"),
        ("mean wall s per measurement", lambda s: f"{statistics.mean(s.wall_s):.2f}"),
        ("first measurement wall s", lambda s: f"{s.wall_s[0]:.2f}"),
        ("calls timed per measurement", lambda s: f"{min(s.samples)}-{max(s.samples)}"),
        (
            "Kernel Tuner: 1st iteration bias",
            lambda s: f"{100 * statistics.median(s.inner_first):+.1f}%" if s.inner_first else "-",
        ),
        (
            "Kernel Tuner: median, not mean",
            lambda s: (
                f"{statistics.median(s.inner_median):.4f}, CV {100 * cv(s.inner_median):.2f}%"
                if s.inner_median
                else "-"
            ),
        ),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in all_series))
    console.print(table)
    console.print(
        "first-run bias: first measurement / median of the others - 1. 1st iteration bias: within one Kernel Tuner "
        "measurement, its first iteration / median of its other iterations - 1 (evoteam discards warm-up calls). "
        "median, not mean: Kernel Tuner's iterations reduced by their median instead of the mean it reports"
    )


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return f"load average (1/5/15 min): {one:.2f} {five:.2f} {fifteen:.2f}"


def _to_bf16(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    bits = values.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16(words: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    return (words.astype(np.uint32) << 16).view(np.float32)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = parse_args(given)
    console = Console(width=130, highlight=False, markup=False, soft_wrap=True)
    console.print(f"command: {shlex.join(['python', 'benchmarks/evaluator_vs_kernel_tuner.py', *given])}")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    console.print(
        f"machine: {cpu_name()}; {os.cpu_count()} logical cores ({usable} usable); Python "
        f"{platform.python_version()}; Kernel Tuner {metadata.version('kernel_tuner')}"
    )
    console.print(f"kernel: examples/rmsnorm/kernels/rmsnorm.cpp, batch_size={args.size} x 4096 bf16")
    console.print(f"{_load()} (other processes on this machine compete for its cores)")
    console.print(
        "evoteam side, per measurement: Evaluator(LocalRunner).evaluate(...) on one workload, like "
        f"`evoteam bench {TASK}` (run in examples/rmsnorm) does per workload"
    )
    console.print(
        f"Kernel Tuner side, per measurement: tune_kernel({KT_ENTRY!r}, rmsnorm.cpp + timing wrapper, "
        f'({args.size},), [hidden_states, weight, output, np.int64({args.size})], {{"block_size_x": [1]}}, '
        f'lang="C", compiler_options=flags, iterations={args.kt_iterations})',
        soft_wrap=True,
    )
    start = time.perf_counter()
    try:
        all_series = run_all(args, console)
    except RuntimeError as exc:
        console.print(f"FAILED {exc}")
        return 1
    report(console, all_series)
    console.print(_load())
    console.print(f"total wall time: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
