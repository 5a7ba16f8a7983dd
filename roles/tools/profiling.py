"""The ``profile`` tool behind a pluggable ``Profiler``: ``TimingProfiler`` measures per-workload timing spread
and reads compile resources from the evaluation; for CUDA kernels ``NcuProfiler`` adds Nsight Compute's counters
of the largest workload, for C++ kernels ``PerfProfiler`` adds ``perf stat``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import (
    BenchInputError,
    BuildResult,
    EvaluationStatus,
    KernelProfile,
    KernelResources,
    KernelTask,
    LocalHost,
    PerfHost,
    PerfRunner,
    ProfileHost,
    ProfileRequest,
    ProfileUnavailable,
    Solution,
    build,
    perf_profile,
    profile_workload,
    require_perf,
    require_profiler,
)
from evoteam.roles.tools import render
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, workspace_solution
from evoteam.roles.tools.evaluation import EvaluationCache
from evoteam.roles.workspace import Workspace


class WorkloadProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uuid: str
    axes: dict[str, int] = Field(default_factory=dict)
    status: EvaluationStatus
    reason: str = ""
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    noise: float | None = None
    """Relative 95% confidence half-width of the median."""
    samples: int = 0
    baseline_median_ms: float | None = None
    speedup: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    """Hardware counters by name (a GPU profiler fills these; the timing profiler leaves them empty)."""


class ProfileReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profiler: str
    status: EvaluationStatus
    workloads: list[WorkloadProfile]
    resources: list[KernelResources] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


Builder = Callable[[Solution], BuildResult]


class Profiler(Protocol):
    def profile(self, solution: Solution) -> ProfileReport: ...


class TimingProfiler:
    """The CPU default: per-workload median/p20/p80/noise from an evaluation, plus the build's resources."""

    name = "timing"

    def __init__(self, evaluations: EvaluationCache) -> None:
        self.evaluations = evaluations

    def profile(self, solution: Solution) -> ProfileReport:
        result = self.evaluations.evaluate(solution)
        rows = []
        for w in result.workloads:
            t, b = w.timing, w.baseline_timing
            rows.append(
                WorkloadProfile(
                    uuid=w.uuid,
                    axes=w.axes,
                    status=w.status,
                    reason=w.reason,
                    median_ms=t.median_ms if t else None,
                    p20_ms=t.p20_ms if t else None,
                    p80_ms=t.p80_ms if t else None,
                    noise=t.noise if t else None,
                    samples=t.n if t else 0,
                    baseline_median_ms=b.median_ms if b else None,
                    speedup=w.speedup,
                )
            )
        notes = ["timing only: no hardware counters on this machine"]
        return ProfileReport(
            profiler=self.name,
            status=result.status,
            workloads=rows,
            resources=result.resources or result.build.resources,
            notes=notes,
        )


class NcuProfiler:
    """CUDA kernels: the timing profile, plus Nsight Compute's counters for the largest workload (duration,
    speed of light, occupancy, DRAM traffic, cache hit rates) as that workload's ``metrics``. Where ncu cannot
    run (no ncu, no GPU) or profiles nothing, the timing profile says why in its notes."""

    name = "ncu"

    def __init__(
        self, timing: Profiler, task: KernelTask, host: ProfileHost | None = None, builder: Builder = build
    ) -> None:
        self.timing = timing
        self.task = task
        self.host: ProfileHost = host if host is not None else LocalHost()
        self.builder = builder

    def profile(self, solution: Solution) -> ProfileReport:
        report = self.timing.profile(solution)
        report.profiler = f"{report.profiler}+ncu"
        try:
            require_profiler(self.host)
        except ProfileUnavailable as exc:
            report.notes = [f"no hardware counters: {exc}"]
            return report
        definition = self.task.load_definition()
        workloads = self.task.load_workloads()
        largest = max(workloads, key=lambda w: sum(w.axes.values()))
        built = self.builder(solution)
        if not built.ok or built.artifact is None:
            report.notes = ["no hardware counters: the kernel does not build"]
            return report
        request = ProfileRequest(
            solution=solution,
            artifact=built.artifact,
            definition=definition,
            workload=largest,
            blob_root=str(self.task.blob_root()),
        )
        profiled = profile_workload(self.host, request)
        if profiled.error is not None or not profiled.kernels:
            report.notes = [f"no hardware counters: {profiled.error or 'ncu profiled no kernel'}"]
            return report
        counters = kernel_metrics(profiled.kernels[0])
        for row in report.workloads:
            if row.uuid == largest.uuid:
                row.metrics = counters
        kernels = ", ".join(dict.fromkeys(k.name for k in profiled.kernels))
        report.notes = [f"ncu counters of {largest.uuid} (its first launch of {kernels})"]
        return report


class PerfProfiler:
    """C++ kernels: the timing profile, plus ``perf stat``'s counters over the kernel's calls on the largest
    workload (cycles, instructions, cache and branch misses where the CPU exposes them; task clock, page faults,
    context switches everywhere perf runs) as that workload's ``metrics``, with IPC and miss rates derived."""

    name = "perf"

    def __init__(
        self, timing: Profiler, task: KernelTask, host: PerfRunner | None = None, builder: Builder = build
    ) -> None:
        self.timing = timing
        self.task = task
        self.host: PerfRunner = host if host is not None else PerfHost()
        self.builder = builder

    def profile(self, solution: Solution) -> ProfileReport:
        report = self.timing.profile(solution)
        report.profiler = f"{report.profiler}+perf"
        try:
            require_perf(self.host)
        except ProfileUnavailable as exc:
            report.notes = [f"no counters: {exc}"]
            return report
        workloads = self.task.load_workloads()
        largest = max(workloads, key=lambda w: sum(w.axes.values()))
        built = self.builder(solution)
        if not built.ok or built.artifact is None:
            report.notes = ["no counters: the kernel does not build"]
            return report
        request = ProfileRequest(
            solution=solution,
            artifact=built.artifact,
            definition=self.task.load_definition(),
            workload=largest,
            blob_root=str(self.task.blob_root()),
            device="cpu",
            calls=PERF_CALLS,
        )
        counted = perf_profile(self.host, request)
        if counted.error is not None:
            report.notes = [f"no counters: {counted.error}"]
            return report
        for row in report.workloads:
            if row.uuid == largest.uuid:
                row.metrics = perf_metrics(counted.counters, counted.calls)
        report.notes = [f"perf counters of {largest.uuid}, per kernel call (over {counted.calls} calls)"]
        if counted.unsupported:
            report.notes.append(f"not counted on this machine: {', '.join(counted.unsupported)}")
        return report


PERF_CALLS = 20


def perf_metrics(counters: dict[str, float], calls: int) -> dict[str, float]:
    """Per call; with the ratios a kernel engineer reads first (IPC, miss rates) where their parts were counted."""
    out = {f"{name}_per_call" if name != "task-clock" else "task_clock_ms_per_call": value / calls
           for name, value in counters.items()}  # fmt: skip
    if counters.get("cycles") and "instructions" in counters:
        out["ipc"] = counters["instructions"] / counters["cycles"]
    if counters.get("cache-references") and "cache-misses" in counters:
        out["cache_miss_rate"] = counters["cache-misses"] / counters["cache-references"]
    if counters.get("branches") and "branch-misses" in counters:
        out["branch_miss_rate"] = counters["branch-misses"] / counters["branches"]
    return out


def kernel_metrics(kernel: KernelProfile) -> dict[str, float]:
    """The counters of one ncu launch worth a model's attention, by short name (only those ncu reported)."""
    sol, occ, mem = kernel.speed_of_light, kernel.occupancy, kernel.memory
    found = {
        "duration_us": kernel.duration_us,
        "registers_per_thread": kernel.registers_per_thread,
        "sm_pct": sol.sm_throughput_pct,
        "memory_pct": sol.memory_throughput_pct,
        "dram_pct": sol.dram_throughput_pct,
        "occupancy_achieved_pct": occ.achieved_pct,
        "occupancy_theoretical_pct": occ.theoretical_pct,
        "dram_read_bytes": mem.dram_bytes_read,
        "dram_written_bytes": mem.dram_bytes_written,
        "l1_hit_pct": mem.l1_hit_rate_pct,
        "l2_hit_pct": mem.l2_hit_rate_pct,
    }
    return {name: value for name, value in found.items() if value is not None}


class FakeProfiler:
    def __init__(self, report: ProfileReport) -> None:
        self.report = report
        self.calls: list[Solution] = []

    def profile(self, solution: Solution) -> ProfileReport:
        self.calls.append(solution)
        return self.report


def render_report(report: ProfileReport) -> str:
    lines = [f"profile ({report.profiler}): {report.status.value}"]
    lines.append("workload | median ms | p20..p80 ms | noise | n | baseline ms | speedup")
    for w in report.workloads:
        if w.median_ms is None:
            lines.append(f"{w.uuid} {w.axes} | {w.status.value}: {w.reason.strip()[:160]}")
            continue
        spread = f"{w.p20_ms:.4g}..{w.p80_ms:.4g}" if w.p20_ms is not None and w.p80_ms is not None else "n/a"
        noise = f"{w.noise:.1%}" if w.noise is not None else "n/a"
        base = f"{w.baseline_median_ms:.4g}" if w.baseline_median_ms is not None else "n/a"
        speed = f"{w.speedup:.3f}x" if w.speedup is not None else "n/a"
        lines.append(f"{w.uuid} {w.axes} | {w.median_ms:.4g} | {spread} | {noise} | {w.samples} | {base} | {speed}")
        if w.metrics:
            lines.append("    " + ", ".join(f"{k}={v:g}" for k, v in sorted(w.metrics.items())))
    if report.resources:
        lines += ["resources:", render.resources(report.resources)]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


class ProfileInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProfileTool:
    name = "profile"
    description = (
        "Profile the workspace's current kernel: per-workload timing (median, p20..p80, noise, samples) against "
        "the baseline, compile resources, and hardware counters where the profiler has them."
    )
    input_model = ProfileInput

    def __init__(
        self, task: KernelTask, workspace: Workspace, definition: str, profiler: Profiler, author: Author
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.profiler = profiler
        self.author = author

    def run(self, args: ProfileInput) -> ToolResult:
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition,
                name=f"{self.task.name}-{self.author.agent_id}-profile",
                author=self.author.role,
            )
            report = self.profiler.profile(solution)
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        except BenchInputError as exc:
            return ToolResult(content=f"the task itself cannot be evaluated: {exc}", is_error=True)
        return ToolResult(content=render_report(report), data=report.model_dump(mode="json"))
