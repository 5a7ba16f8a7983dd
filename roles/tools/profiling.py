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
    Workload,
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


Counted = tuple[dict[str, float], list[str]] | str
"""A counter profiler's answer: (the largest workload's metrics, notes), or why there are none."""


class CountingProfiler:
    """The timing profile, plus hardware counters of the largest workload as that workload's ``metrics``
    (``count`` says how); where the counters cannot be had, the notes say why."""

    name = "counters"

    def __init__(self, timing: Profiler, task: KernelTask, builder: Builder = build) -> None:
        self.timing = timing
        self.task = task
        self.builder = builder

    def profile(self, solution: Solution) -> ProfileReport:
        report = self.timing.profile(solution)
        report.profiler = f"{report.profiler}+{self.name}"
        found = self._counted(solution)
        if isinstance(found, str):
            report.notes = [f"no counters: {found}"]
            return report
        (metrics, notes), largest = found
        for row in report.workloads:
            if row.uuid == largest.uuid:
                row.metrics = metrics
        report.notes = notes
        return report

    def _counted(self, solution: Solution) -> tuple[tuple[dict[str, float], list[str]], Workload] | str:
        try:
            self.require()
        except ProfileUnavailable as exc:
            return str(exc)
        largest = max(self.task.load_workloads(), key=lambda w: sum(w.axes.values()))
        built = self.builder(solution)
        if not built.ok or built.artifact is None:
            return "the kernel does not build"
        request = ProfileRequest(
            solution=solution,
            artifact=built.artifact,
            definition=self.task.load_definition(),
            workload=largest,
            blob_root=str(self.task.blob_root()),
        )
        counted = self.count(request)
        return counted if isinstance(counted, str) else (counted, largest)

    def require(self) -> None:
        """Raises ``ProfileUnavailable`` when the counter tool cannot run here."""

    def count(self, request: ProfileRequest) -> Counted:
        raise NotImplementedError


class NcuProfiler(CountingProfiler):
    """CUDA kernels: Nsight Compute's counters of the largest workload (duration, speed of light, occupancy,
    DRAM traffic, cache hit rates)."""

    name = "ncu"

    def __init__(
        self, timing: Profiler, task: KernelTask, host: ProfileHost | None = None, builder: Builder = build
    ) -> None:
        super().__init__(timing, task, builder)
        self.host: ProfileHost = host if host is not None else LocalHost()

    def require(self) -> None:
        require_profiler(self.host)

    def count(self, request: ProfileRequest) -> Counted:
        profiled = profile_workload(self.host, request)
        if profiled.error is not None or not profiled.kernels:
            return profiled.error or "ncu profiled no kernel"
        kernels = ", ".join(dict.fromkeys(k.name for k in profiled.kernels))
        note = f"ncu counters of {request.workload.uuid} (its first launch of {kernels})"
        return kernel_metrics(profiled.kernels[0]), [note]


class PerfProfiler(CountingProfiler):
    """C++ kernels: ``perf stat``'s counters over the kernel's calls on the largest workload (cycles,
    instructions, cache and branch misses where the CPU exposes them; task clock, page faults, context switches
    everywhere perf runs), per call, with IPC and miss rates derived."""

    name = "perf"

    def __init__(
        self, timing: Profiler, task: KernelTask, host: PerfRunner | None = None, builder: Builder = build
    ) -> None:
        super().__init__(timing, task, builder)
        self.host: PerfRunner = host if host is not None else PerfHost()

    def require(self) -> None:
        require_perf(self.host)

    def count(self, request: ProfileRequest) -> Counted:
        counted = perf_profile(self.host, request.model_copy(update={"device": "cpu", "calls": PERF_CALLS}))
        if counted.error is not None:
            return counted.error
        notes = [f"perf counters of {counted.workload}, per kernel call (over {counted.calls} calls)"]
        if counted.unsupported:
            notes.append(f"not counted on this machine: {', '.join(counted.unsupported)}")
        return perf_metrics(counted.counters, counted.calls), notes


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
