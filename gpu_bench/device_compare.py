"""Device-check helpers: time one CUDA example kernel with evoteam's evaluator and with Triton's ``do_bench``
on the same inputs, measure a kernel against the device's copy bandwidth, run the offline team, and print the
figures of a device check from the files it wrote.

``python -m evoteam.gpu_bench.device_compare compare [--kernel K] [--root DIR] [--json FILE]``: exit 0 when
both timings exist, 1 when the kernel failed, 2 on bad input, 3 when skipped (no GPU, no triton).
``python -m evoteam.gpu_bench.device_compare roofline [--kernel K] [--values 16384,65536] [--json FILE]``: the
kernel's bandwidth on large workloads as a fraction of the device's measured copy bandwidth (on the CPU too).
``python -m evoteam.gpu_bench.device_compare offline-team [--kernel K] [--rounds N] [--json FILE]``: evolve the
kernel with the offline team and keep the run's ``evoteam show --json``.
``python -m evoteam.gpu_bench.device_compare table DIR``: the table of ``DIR/bench_*.json`` (``evoteam bench
--json`` output) and ``DIR/compare.json``, then one line per other figure the check wrote (identical kernels,
ours vs do_bench per workload, the roofline, the ncu counters, the GPU tests, the offline team).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
import xml.etree.ElementTree as ET
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
    kernel: str, root: Path, max_time_s: float, workloads: list[Workload] | None = None
) -> tuple[KernelTask, list[Workload], dict[str, tuple[float | None, float | None]], dict[str, str]]:
    """The kernel's task, workloads (its own, or those given), per-workload (median ms, launch ms) and status
    through the evaluator's worker."""
    from evoteam.gpu_bench.runner import LocalRunner
    from evoteam.gpu_bench.task import find_task
    from evoteam.gpu_bench.timing.statistics import TimingConfig
    from evoteam.gpu_bench.worker.evaluate import EvalConfig

    task = find_task(kernel, root)
    definition = task.load_definition()
    workloads = task.load_workloads() if workloads is None else workloads
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


def no_gpu() -> str | None:
    """Why no CUDA GPU can be used here (None: one can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA GPU"


def compare(args: argparse.Namespace) -> int:
    if (why := no_gpu()) is not None:
        print(f"device_compare: {why}: skipped", file=sys.stderr)
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


# ---- roofline ------------------------------------------------------------------------------------------------------


class RooflinePoint(BaseModel):
    axes: dict[str, int]
    bytes: int
    """Every input and output tensor's bytes: what the kernel reads and writes at least once."""
    median_ms: float | None
    status: str

    @property
    def gbps(self) -> float | None:
        return self.bytes / (self.median_ms * 1e-3) / 1e9 if self.median_ms else None


class Roofline(BaseModel):
    """A kernel's memory bandwidth on large workloads, as a fraction of the device's measured copy bandwidth."""

    kernel: str
    device: str
    copy_gbps: float
    """A copy of ``copy_bytes`` on the device, bytes read plus bytes written per second (median of repeats)."""
    copy_bytes: int
    seconds: float
    """Wall time of the evaluator's run over every point: build, inputs, verification and timing."""
    points: list[RooflinePoint]

    def fraction(self, point: RooflinePoint) -> float | None:
        gbps = point.gbps
        return gbps / self.copy_gbps if gbps is not None and self.copy_gbps > 0 else None


def copy_gbps(device: str, nbytes: int, repeats: int = 10) -> float:
    """Bandwidth of a device-to-device (on the CPU: memory-to-memory) copy of ``nbytes``, counting the bytes
    read and the bytes written, in GB/s: the median of ``repeats`` copies after one warm-up."""
    import time

    import torch

    source = torch.empty(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    times_s: list[float] = []
    for _ in range(repeats):
        if device == "cuda":
            cuda: Any = torch.cuda  # Event's constructor is untyped
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            target.copy_(source)
            end.record()
            end.synchronize()
            times_s.append(float(start.elapsed_time(end)) / 1e3)
        else:
            began = time.perf_counter()
            target.copy_(source)
            times_s.append(time.perf_counter() - began)
    return 2 * nbytes / statistics.median(times_s) / 1e9


def roofline(args: argparse.Namespace) -> int:
    import time

    from evoteam.gpu_bench.interop.synth.axes import workload_bytes
    from evoteam.gpu_bench.task import TaskError, find_task

    try:
        task = find_task(args.kernel, args.root)
        definition = task.load_definition()
        first = task.load_workloads()[0]
    except (TaskError, IndexError) as exc:
        print(f"device_compare: error: {exc or 'the task has no workloads'}", file=sys.stderr)
        return 2
    on_gpu = task.target.startswith("sm_")
    if on_gpu and (why := no_gpu()) is not None:
        print(f"device_compare: {why}: skipped", file=sys.stderr)
        return SKIPPED
    if args.axis not in first.axes:
        print(f"device_compare: error: the task's workloads have no axis {args.axis!r}", file=sys.stderr)
        return 2
    workloads = [
        first.model_copy(update={"uuid": f"roofline-{value}", "axes": {**first.axes, args.axis: value}})
        for value in args.values
    ]
    device = "cuda" if on_gpu else "cpu"
    copy_bytes = args.copy_mib * 2**20
    bandwidth = copy_gbps(device, copy_bytes)
    began = time.perf_counter()
    try:
        _, _, medians, statuses = ours(args.kernel, args.root, args.max_time, workloads)
    except RuntimeError as exc:
        print(f"device_compare: {exc}", file=sys.stderr)
        return 1
    points = [
        RooflinePoint(
            axes=w.axes,
            bytes=workload_bytes(definition, definition.axis_values(w.axes)),
            median_ms=medians.get(w.uuid, (None, None))[0],
            status=statuses.get(w.uuid, ""),
        )
        for w in workloads
    ]
    result = Roofline(
        kernel=args.kernel,
        device=device,
        copy_gbps=bandwidth,
        copy_bytes=copy_bytes,
        seconds=time.perf_counter() - began,
        points=points,
    )
    print(f"copy bandwidth ({device}, {args.copy_mib} MiB, read + write): {bandwidth:.0f} GB/s")
    for line in roofline_lines(result):
        print(line)
    if args.json:
        args.json.write_text(result.model_dump_json(indent=2))
    return 0 if all(point.gbps is not None for point in points) else 1


def roofline_lines(result: Roofline) -> list[str]:
    lines = []
    for point in result.points:
        axes = " ".join(f"{k}={v}" for k, v in point.axes.items())
        fraction = result.fraction(point)
        if fraction is None:
            lines.append(f"{result.kernel} {axes}: {point.status or 'no timing'}")
            continue
        lines.append(
            f"{result.kernel} {axes}: {point.bytes / 2**20:.1f} MiB moved in {point.median_ms:.4f} ms: "
            f"{point.gbps:.0f} GB/s, {fraction:.0%} of the copy's {result.copy_gbps:.0f} GB/s"
        )
    lines.append(f"(all points benched in {result.seconds:.1f} s: build, inputs, verification, timing)")
    return lines


# ---- the offline team ------------------------------------------------------------------------------------------------


def offline_team(args: argparse.Namespace) -> int:
    """``evoteam evolve KERNEL --llm offline`` in the task's folder, then that run's ``evoteam show --json``."""
    import subprocess

    cli = [sys.executable, "-m", "evoteam.cli.main"]
    evolve = [*cli, "evolve", args.kernel, "--llm", "offline", "--rounds", str(args.rounds)]
    proc = subprocess.run(evolve, cwd=args.root, check=False)
    if proc.returncode != 0:
        print(f"device_compare: evoteam evolve exited with {proc.returncode}", file=sys.stderr)
        return 1
    runs = subprocess.run([*cli, "runs"], cwd=args.root, capture_output=True, text=True, check=False).stdout
    ids = [line.split("\t")[0] for line in runs.splitlines() if line.split("\t")[1:2] == [args.kernel]]
    if not ids:
        print(f"device_compare: no run of {args.kernel} is listed by evoteam runs", file=sys.stderr)
        return 1
    shown = subprocess.run(
        [*cli, "show", ids[-1], "--json"], cwd=args.root, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        print(f"device_compare: evoteam show {ids[-1]} failed: {shown.stderr.strip()}", file=sys.stderr)
        return 1
    if args.json:
        args.json.write_text(shown.stdout)
    print(*_offline_team_lines(json.loads(shown.stdout)), sep="\n")
    return 0


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


def figure_lines(folder: Path) -> list[str]:
    """The device check's other figures, one line each, from the files its steps wrote (each says when its file
    is missing or unreadable): identical kernels, ours vs do_bench per workload, the roofline, the ncu
    counters, the GPU tests (the private-stream case among them), the offline team's result and how a kernel
    times from outside the process that launches it (``benchmarks/gpu_host_timing.py``)."""
    lines = []
    for label, pattern, reader in (
        ("identical kernels", "identical.json", _identical),
        ("ours / do_bench", "compare.json", _per_workload),
        ("roofline", "roofline.json", _roofline),
        ("ncu", "profile_*.json", _ncu),
        ("GPU tests", "pytest-gpu.xml", _gpu_tests),
        ("offline team", "evolve.json", _offline_team),
        ("host timing", "host_timing.json", _host_timing),
    ):
        paths = sorted(path for path in folder.glob(pattern) if path.is_file())
        try:
            found = reader(paths) if paths else ["not run"]
        except (OSError, ValueError, KeyError, TypeError, IndexError, ET.ParseError) as exc:
            found = [f"unreadable ({type(exc).__name__}: {exc})"]
        lines += [f"{label}: {line}" for line in found]
    return lines


def _host_timing(paths: list[Path]) -> list[str]:
    """``benchmarks/gpu_host_timing.py``'s figures: per size, each way of timing as a ratio to events here."""
    found = json.loads(paths[0].read_text())
    lines = []
    for n, row in found["rows"].items():
        here = row["here"]
        ways = [(k, v) for k, v in row.items() if k not in ("here", "empty round trip") and v is not None]
        cells = ", ".join(f"{k} {v / here:.2f}x" for k, v in ways)
        lines.append(f"{n} elements, {here:.1f} us here (round trip {row['empty round trip']:.1f} us): {cells}")
    return lines


def _identical(paths: list[Path]) -> list[str]:
    rows = json.loads(paths[0].read_text())
    by_kernel: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_kernel.setdefault(row["kernel"], []).append(row)
    lines = []
    for kernel, kernel_rows in by_kernel.items():
        paired = [r["paired"] for r in kernel_rows if r["paired"] is not None]
        held = sum(1 for r in kernel_rows if r["ci"] and r["ci"][0] <= 1.0 <= r["ci"][1])
        if not paired:
            lines.append(f"{kernel} against a copy: no ratio")
            continue
        lines.append(
            f"{kernel} against a copy: paired ratios {min(paired):.3f}-{max(paired):.3f} over {len(kernel_rows)} "
            f"workloads, {held}/{len(kernel_rows)} intervals hold 1"
        )
    return lines


def _per_workload(paths: list[Path]) -> list[str]:
    comparison = Comparison.model_validate_json(paths[0].read_text())
    cells = []
    for w in comparison.workloads:
        axes = ",".join(f"{k}={v}" for k, v in w.axes.items()) or w.uuid[:8]
        cells.append(f"{axes} {w.ratio:.3f}" if w.ratio is not None else f"{axes} -")
    within = sum(1 for r in comparison.ratios() if 0.95 <= r <= 1.05)
    return [f"{comparison.kernel}: {'; '.join(cells)} ({within}/{len(comparison.workloads)} within 5%)"]


def _roofline(paths: list[Path]) -> list[str]:
    result = Roofline.model_validate_json(paths[0].read_text())
    return [f"copy {result.copy_gbps:.0f} GB/s ({result.device})", *roofline_lines(result)]


def _ncu(paths: list[Path]) -> list[str]:
    lines = []
    for path in paths:
        payload = json.loads(path.read_text()) if path.stat().st_size else {}
        kernels = payload.get("kernels") or []
        if not kernels:
            lines.append(
                f"{path.stem.removeprefix('profile_')}: no kernel profiled ({payload.get('error') or 'empty'})"
            )
            continue
        for k in kernels:
            memory = k.get("memory") or {}
            duration = k.get("duration_us")
            read, written = memory.get("dram_bytes_read"), memory.get("dram_bytes_written")
            lines.append(
                f"{str(k.get('name', '?'))[:40]}: duration {f'{duration} us' if duration is not None else 'MISSING'}, "
                f"DRAM bytes read {read if read is not None else 'MISSING'}, "
                f"written {written if written is not None else 'MISSING'}"
            )
    return lines


def _gpu_tests(paths: list[Path]) -> list[str]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    private: list[str] = []
    for case in ET.parse(paths[0]).getroot().iter("testcase"):
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        counts[outcome] += 1
        if "private_stream" in case.get("name", ""):
            private.append(outcome)
    line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if private:
        verdict = {"passed": "rejected (its test passed)", "failed": "NOT rejected (its test failed)"}
        line += f"; the private-stream kernel: {verdict.get(private[0], private[0])}"
    return [line]


def _offline_team(paths: list[Path]) -> list[str]:
    return _offline_team_lines(json.loads(paths[0].read_text()))


def _offline_team_lines(run: dict[str, Any]) -> list[str]:
    """A run's result (``evoteam show --json``): its best over the start, the start over the task's baseline."""
    start = (run.get("start") or {}).get("geomean_speedup")
    rounds = len(run.get("rounds") or [])
    kernel = (run.get("config") or {}).get("kernel") or "the kernel"
    head = f"{kernel}, {rounds} round(s)"
    if start is None:
        return [f"{head}: the start did not pass"]
    best, best_speedup = run.get("best"), run.get("best_speedup")
    if best is None or best_speedup is None:
        return [f"{head}: no improvement over the start, which is {start:.3f}x of the baseline"]
    return [
        f"{head}: best {best} at {best_speedup:.3f}x of the start, which is {start:.3f}x of the baseline: "
        f"{best_speedup * start:.3f}x of the baseline"
    ]


def table(args: argparse.Namespace) -> int:
    header = ["kernel", "workloads", "median us", "speedup (geomean)", "ours/do_bench", "pass/fail"]
    rows = figures_rows(args.folder)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if not rows:
        print(f"(no bench_*.json in {args.folder})")
    print("median us: the median over workloads of each workload's median; speedup: against the task's baseline")
    print()
    for line in figure_lines(args.folder):
        print(line)
    return 0


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evoteam.gpu_bench.device_compare", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="our timing vs triton.testing.do_bench on one kernel")
    c.add_argument("--kernel", default="rmsnorm_cuda")
    c.add_argument("--root", type=Path, default=Path("examples/rmsnorm"), help="folder with the evoteam.toml")
    c.add_argument("--max-time", type=float, default=1.0, help="our timing budget per workload, seconds")
    c.add_argument("--json", type=Path, help="write the comparison here")
    c.set_defaults(run=compare)
    r = sub.add_parser("roofline", help="a kernel's bandwidth on large workloads against the device's copy")
    r.add_argument("--kernel", default="rmsnorm_cuda")
    r.add_argument("--root", type=Path, default=Path("examples/rmsnorm"), help="folder with the evoteam.toml")
    r.add_argument("--axis", default="batch_size", help="the axis to set (default %(default)s)")
    r.add_argument("--values", type=_ints, default=[16384, 65536], help="its values, comma-separated")
    r.add_argument("--copy-mib", type=int, default=1024, help="size of the copy timed for the device's bandwidth")
    r.add_argument("--max-time", type=float, default=0.5, help="our timing budget per workload, seconds")
    r.add_argument("--json", type=Path, help="write the result here")
    r.set_defaults(run=roofline)
    o = sub.add_parser("offline-team", help="evolve a kernel with the offline team; keep the run's result")
    o.add_argument("--kernel", default="rmsnorm_cuda_naive")
    o.add_argument("--root", type=Path, default=Path("examples/rmsnorm"), help="folder with the evoteam.toml")
    o.add_argument("--rounds", type=int, default=2)
    o.add_argument("--json", type=Path, help="write the run's `evoteam show --json` here")
    o.set_defaults(run=offline_team)
    t = sub.add_parser("table", help="the figures table of a device check's output folder")
    t.add_argument("folder", type=Path)
    t.set_defaults(run=table)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
