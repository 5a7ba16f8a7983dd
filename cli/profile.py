"""``evoteam profile``: build a kernel of evoteam.toml and profile it on one workload with Nsight Compute.

Exit codes: 0 a profile was taken, 1 the kernel did not build or nothing was profiled (the reason shown),
2 bad input or a machine that cannot profile (no ncu, no GPU; one error line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoteam.gpu_bench.api import (
    DEFAULT_SECTIONS,
    BuildResult,
    Definition,
    ProfileHost,
    ProfileReport,
    Solution,
    Workload,
)

Builder = Callable[[Solution], BuildResult]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "profile",
        help="profile a CUDA kernel on one workload with Nsight Compute (ncu)",
        description="Build a kernel of evoteam.toml as it is now and profile one workload with Nsight Compute "
        "(ncu from $EVOTEAM_NCU, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin). Exit status: 0 profiled, 1 the "
        "kernel did not build or nothing was profiled, 2 bad input or no ncu / no GPU.",
    )
    p.add_argument("kernel", help="a kernel name from evoteam.toml (searched from the current folder up)")
    p.add_argument(
        "--workload", metavar="UUID|INDEX", help="a workload's uuid (or a unique prefix) or 0-based index "
        "(default: the largest workload)"
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--sections", nargs="+", default=list(DEFAULT_SECTIONS), metavar="SECTION",
        help=f"ncu sections to collect (default: {' '.join(DEFAULT_SECTIONS)})",
    )  # fmt: skip
    p.add_argument("--kernel-regex", help="which launches to profile (default: the entry point's name)")
    p.add_argument("--count", type=int, default=1, help="how many matching launches to profile (default 1)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed for ncu (default 300)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.api import LocalHost, build

    return profile_command(args, LocalHost(), build)


def profile_command(args: argparse.Namespace, host: ProfileHost, builder: Builder) -> int:
    from evoteam.gpu_bench.api import (
        ProfileRequest,
        ProfileUnavailable,
        TaskError,
        find_task,
        profile_workload,
        require_profiler,
    )

    try:
        if args.count < 1:
            raise TaskError("--count must be at least 1")
        task = find_task(args.kernel, Path.cwd())
        if task.target == "cpu":
            raise TaskError(f'kernel {task.name} targets the CPU; ncu profiles CUDA kernels (target = "sm_90a", ...)')
        definition = task.load_definition()
        workload = select_workload(definition, task.load_workloads(), args.workload)
        solution = task.source_solution(definition)
        require_profiler(host)
        built = builder(solution)
        if not built.ok or built.artifact is None:
            print(built.log, file=sys.stderr)
            print(f"evoteam profile: kernel {task.name} did not build", file=sys.stderr)
            return 1
        request = ProfileRequest(
            solution=solution,
            artifact=built.artifact,
            definition=definition,
            workload=workload,
            blob_root=str(task.blob_root()),
        )
        report = profile_workload(
            host, request, kernel_regex=args.kernel_regex, sections=args.sections, count=args.count,
            timeout_s=args.timeout,
        )  # fmt: skip
    except (TaskError, ProfileUnavailable) as exc:
        print(f"evoteam profile: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evoteam profile: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(report.model_dump_json())
    else:
        show(report)
    return 0 if report.kernels else 1


def select_workload(definition: Definition, workloads: list[Workload], which: str | None) -> Workload:
    """By 0-based index, uuid or unique uuid prefix; by default the one with the most input elements."""
    from evoteam.gpu_bench.api import TaskError

    if which is None:
        return max(workloads, key=lambda w: _elements(definition, w))
    if which.isdigit():
        index = int(which)
        if index >= len(workloads):
            raise TaskError(f"--workload {index}: there are only {len(workloads)} workloads (0-{len(workloads) - 1})")
        return workloads[index]
    matches = [w for w in workloads if w.uuid == which] or [w for w in workloads if w.uuid.startswith(which)]
    if len(matches) != 1:
        what = "no workload has" if not matches else f"{len(matches)} workloads have"
        raise TaskError(f"--workload {which}: {what} that uuid")
    return matches[0]


def _elements(definition: Definition, workload: Workload) -> int:
    try:
        axes = definition.axis_values(workload.axes)
    except ValueError:
        return 0
    total = 0
    for spec in definition.inputs.values():
        size = 1
        for dim in definition.shape_of(spec, axes) or ():
            size *= dim
        total += size
    return total


def show(report: ProfileReport) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console()
    axes = " ".join(f"{k}={v}" for k, v in report.axes.items())
    if report.error:
        for line in report.output.strip().splitlines()[-20:]:
            print(line, file=sys.stderr)
        print(f"evoteam profile: {report.error}", file=sys.stderr)
        return
    for k in report.kernels:
        sol, occ, mem = k.speed_of_light, k.occupancy, k.memory
        out.print(k.name, markup=False, highlight=False)
        out.print(f"grid {k.grid_size} · block {k.block_size} · {report.kernel} · {axes}", markup=False)
        table = Table()
        table.add_column("metric")
        table.add_column("value", justify="right")
        rows = [
            ("duration", _fmt(k.duration_us, "us")),
            ("compute (SM) throughput", _fmt(sol.sm_throughput_pct, "%")),
            ("memory throughput", _fmt(sol.memory_throughput_pct, "%")),
            ("DRAM throughput", _fmt(sol.dram_throughput_pct, "%")),
            ("L2 / L1 throughput", f"{_fmt(sol.l2_throughput_pct, '%')} / {_fmt(sol.l1tex_throughput_pct, '%')}"),
            ("occupancy achieved / theoretical", f"{_fmt(occ.achieved_pct, '%')} / {_fmt(occ.theoretical_pct, '%')}"),
            ("registers per thread", _fmt(k.registers_per_thread, "")),
            (
                "DRAM read / written",
                f"{_fmt(_mb(mem.dram_bytes_read), 'MB')} / {_fmt(_mb(mem.dram_bytes_written), 'MB')}",
            ),
            ("DRAM bandwidth", _fmt(_gb(mem.dram_bandwidth_bytes_per_s), "GB/s")),
            ("L1 / L2 hit rate", f"{_fmt(mem.l1_hit_rate_pct, '%')} / {_fmt(mem.l2_hit_rate_pct, '%')}"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        out.print(table)
    for message in report.messages:
        if message.startswith(("==WARNING==", "==ERROR==")):
            print(message, file=sys.stderr)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    text = f"{value:.0f}" if abs(value) >= 1000 or value == int(value) else f"{value:.3g}"
    return f"{text} {unit}".rstrip() if unit != "%" else f"{text}%"


def _mb(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def _gb(value: float | None) -> float | None:
    return None if value is None else value / 1e9
