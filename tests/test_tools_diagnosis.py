"""Kernel diagnosis for agents: compute-sanitizer's report read into findings (``gpu_bench/profile/sanitizer.py``),
the ``sanitize`` tool over a fake sanitizer, what it says where it cannot run, on a GPU a real memcheck of a
kernel that writes out of bounds; and the ``profile`` tool's counters: ncu's for CUDA kernels (``NcuProfiler``),
``perf stat``'s for C++ ones (``PerfProfiler``, also with the real perf)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DATA, KERNELS, scale_add_task
from evoteam.gpu_bench.api import (
    Definition,
    KernelTask,
    ProfileRequest,
    SanitizerReport,
    SanitizerTool,
    Solution,
    Workload,
    sanitize_workload,
)
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.profile.ncu import FakeHost
from evoteam.gpu_bench.profile.perf import FakePerfHost, PerfHost
from evoteam.gpu_bench.profile.sanitizer import FakeSanitizerHost, LocalSanitizerHost, parse_report, render
from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.roles.agent_api import Submission
from evoteam.roles.knowledge import KnowledgeStore
from evoteam.roles.tools import Author
from evoteam.roles.tools.candidate import seed_workspace
from evoteam.roles.tools.evaluation import EvaluationCache, FakeEvaluations, scripted_result
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.tools.profiling import NcuProfiler, PerfProfiler, ProfileReport, WorkloadProfile, render_report
from evoteam.roles.tools.sanitize import local_sanitizer

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_kernel(const float *, const float *, float *, long)+0x1c0 in /tmp/w/oob_write.cu:9
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f0000000000 is out of bounds
=========     and is 4398046511104 bytes after the nearest allocation at 0x7e0000000000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f1e4] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at oob_kernel(const float *, const float *, float *, long)+0x1c0 in /tmp/w/oob_write.cu:9
=========     by thread (1,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""
AUTHOR = Author(role="Debugger", agent_id="dbg-1", round=1)


@pytest.mark.unit
def test_a_memcheck_report_is_read_into_findings() -> None:
    count, findings = parse_report(MEMCHECK)
    assert count == 2 and len(findings) == 2
    first = findings[0]
    assert first.message == "Invalid __global__ write of size 4 bytes"
    assert first.where == "oob_kernel(const float *, const float *, float *, long)+0x1c0"
    assert (first.file, first.line) == ("/tmp/w/oob_write.cu", 9)
    assert first.details[:2] == ["by thread (0,0,0) in block (0,0,0)", "Address 0x7f0000000000 is out of bounds"]
    assert parse_report("========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)")[0] == 3
    assert parse_report("========= ERROR SUMMARY: 0 errors") == (0, [])
    assert parse_report("the program crashed before the summary") == (None, [])


def request(task: KernelTask) -> ProfileRequest:
    definition = task.load_definition()
    solution = task.source_solution(definition)
    return ProfileRequest(solution=solution, artifact="k.so", definition=definition, workload=task.load_workloads()[0])


@pytest.mark.unit
def test_a_sanitizer_run_reports_its_findings_or_why_it_did_not_finish() -> None:
    task = scale_add_task()
    host = FakeSanitizerHost(output=MEMCHECK, returncode=99)
    report = sanitize_workload(host, request(task), "memcheck")
    [command] = host.commands
    assert command[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "memcheck"]
    assert command[-3:-1] == ["-m", "evoteam.gpu_bench.profile.target"]
    assert report.errors == 2 and report.error is None
    shown = render(report)
    assert shown.splitlines()[0].endswith(": 2 error(s)")
    assert "- Invalid __global__ write of size 4 bytes at oob_kernel(" in shown and "oob_write.cu:9)" in shown
    crashed = sanitize_workload(FakeSanitizerHost(output="Segmentation fault", returncode=139), request(task))
    assert (
        crashed.error == "compute-sanitizer printed no summary (exit status 139)" and "Segmentation" in crashed.output
    )
    late = sanitize_workload(FakeSanitizerHost(returncode=None), request(task), timeout_s=5)
    assert late.error == "compute-sanitizer ran past 5 s and was killed"


def toolbox(  # type: ignore[no-untyped-def]
    tmp_path: Path, task: KernelTask, sanitizer: object = local_sanitizer, profiler: object = None
):
    workspace = seed_workspace(task, tmp_path / "ws")
    services = ToolServices(
        definition=task.load_definition(),
        evaluations=EvaluationCache(FakeEvaluations(lambda s: scripted_result(s.name, {}))),
        knowledge=KnowledgeStore(tmp_path / "r", "k"),
        sanitizer=sanitizer,  # type: ignore[arg-type]
        profiler=profiler,  # type: ignore[arg-type]
    )
    submissions: list[Submission] = []
    return build_toolbox(task, workspace, services, AUTHOR, submissions)


def cuda_task() -> KernelTask:
    return scale_add_task("cuda/oob_write.cu", language="cuda", target="sm_90a", flags=None)


@pytest.mark.unit
def test_the_tool_runs_the_sanitizer_on_the_smallest_workload_by_default(tmp_path: Path) -> None:
    asked: list[tuple[str, SanitizerTool]] = []

    def fake(
        task: KernelTask, definition: Definition, solution: Solution, workload: Workload, tool: SanitizerTool
    ) -> SanitizerReport:
        asked.append((workload.uuid, tool))
        errors, findings = parse_report(MEMCHECK)
        return SanitizerReport(
            tool=tool, kernel=solution.name, workload=workload.uuid, axes=workload.axes, command=[],
            errors=errors, findings=findings,
        )  # fmt: skip

    tools = toolbox(tmp_path, cuda_task(), fake)
    result = tools.call("sanitize", {})
    assert not result.is_error and "2 error(s)" in result.content and asked == [("small-1000", "memcheck")]
    tools.call("sanitize", {"tool": "racecheck", "workload": "large-65536"})
    assert asked[-1] == ("large-65536", "racecheck")
    missing = tools.call("sanitize", {"workload": "nope"})
    assert missing.is_error and "no workload 'nope'" in missing.content
    cpu = toolbox(tmp_path / "cpu", scale_add_task(), fake).call("sanitize", {})
    assert cpu.is_error and cpu.content == "sanitize checks CUDA kernels; this kernel is not CUDA"


@pytest.mark.unit
def test_where_the_sanitizer_cannot_run_the_tool_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = LocalSanitizerHost()
    if host.find_sanitizer() is not None and host.gpu_problem() is None:
        pytest.skip("compute-sanitizer and a GPU are here")
    monkeypatch.setenv("EVOTEAM_COMPUTE_SANITIZER", str(tmp_path / "no-such-tool"))
    result = toolbox(tmp_path, cuda_task()).call("sanitize", {})
    assert result.is_error and "EVOTEAM_COMPUTE_SANITIZER" in result.content


@pytest.mark.gpu
def test_memcheck_finds_the_out_of_bounds_write_on_a_gpu(tmp_path: Path) -> None:
    host = LocalSanitizerHost()
    if host.find_sanitizer() is None or host.gpu_problem() is not None:
        pytest.skip(f"needs compute-sanitizer and a GPU: {host.gpu_problem() or 'no compute-sanitizer'}")
    result = toolbox(tmp_path, cuda_task()).call("sanitize", {})
    assert "Invalid __global__ write" in result.content and "oob_kernel" in result.content, result.content
    assert result.data is not None and (result.data["errors"] or 0) >= 1
    assert (KERNELS / "cuda" / "oob_write.cu").is_file()


class CountingTiming:
    """A timing profile of the task's two workloads, made up."""

    def profile(self, solution: Solution) -> ProfileReport:
        rows = [
            WorkloadProfile(uuid=u, axes={"n": n}, status=EvaluationStatus.PASSED, median_ms=m)
            for u, n, m in (("small-1000", 1000, 0.01), ("large-65536", 65536, 0.2))
        ]
        return ProfileReport(profiler="timing", status=EvaluationStatus.PASSED, workloads=rows)


@pytest.mark.unit
def test_a_cuda_profile_adds_ncu_counters_of_the_largest_workload_or_says_why_not() -> None:
    task = cuda_task()
    built = BuildResult(ok=True, artifact="/tmp/k.so")
    csv = (DATA / "ncu" / "rmsnorm_cuda_h200.csv").read_text()
    host = FakeHost(csv=csv)
    solution = task.source_solution(task.load_definition())
    report = NcuProfiler(CountingTiming(), task, host, lambda s: built).profile(solution)
    small, large = report.workloads
    assert report.profiler == "timing+ncu" and small.metrics == {}
    assert {"duration_us", "dram_pct", "occupancy_achieved_pct"} <= set(large.metrics), large.metrics
    assert report.notes[0].startswith("ncu counters of large-65536 (its first launch of ")
    assert '"uuid":"large-65536"' in host.requests[0]  # the largest workload was profiled
    shown = render_report(report)
    assert "duration_us=" in shown and "dram_pct=" in shown
    none = NcuProfiler(CountingTiming(), task, FakeHost(ncu=None)).profile(solution)
    assert none.notes == ["no counters: Nsight Compute (ncu) was not found on PATH, in $CUDA_HOME/bin or "
                          "/usr/local/cuda/bin"]  # fmt: skip
    assert all(w.metrics == {} for w in none.workloads)


PERF_CSV = """# started on Sun Dec  6 05:00:00 2026

<not supported>,,cycles:u,0,100.00,,
<not supported>,,instructions:u,0,100.00,,
5.37,msec,task-clock:u,5370000,100.00,0.980,CPUs utilized
4,,page-faults:u,5370000,100.00,0.745,K/sec
0,,context-switches:u,5370000,100.00,0.000,/sec
"""
PMU_CSV = (
    "2000000,,cycles,1,100.00,,\n3000000,,instructions,1,100.00,1.50,insn per cycle\n9.5,msec,task-clock,1,100,,\n"
)


@pytest.mark.unit
def test_a_cpp_profile_adds_perf_counters_per_call_or_says_why_not() -> None:
    task = scale_add_task()
    solution = task.source_solution(task.load_definition())
    built = BuildResult(ok=True, artifact="/tmp/k.so")
    host = FakePerfHost(PERF_CSV)
    report = PerfProfiler(CountingTiming(), task, host, lambda s: built).profile(solution)
    small, large = report.workloads
    assert report.profiler == "timing+perf" and small.metrics == {}
    assert large.metrics == {
        "task_clock_ms_per_call": 5.37 / 20,
        "page-faults_per_call": 0.2,
        "context-switches_per_call": 0.0,
    }
    assert report.notes == [
        "perf counters of large-65536, per kernel call (over 20 calls)",
        "not counted on this machine: cycles, instructions",
    ]
    [command] = host.commands
    assert (
        command[1:3] == ["stat", "-x"] and "--delay=-1" in command and command[-2] == "evoteam.gpu_bench.profile.target"
    )
    pmu = PerfProfiler(CountingTiming(), task, FakePerfHost(PMU_CSV), lambda s: built).profile(solution)
    assert pmu.workloads[1].metrics["ipc"] == 1.5 and pmu.notes == [
        "perf counters of large-65536, per kernel call (over 20 calls)"
    ]
    missing = PerfProfiler(CountingTiming(), task, FakePerfHost(perf=None)).profile(solution)
    assert missing.notes[0].startswith("no counters: perf was not found on PATH")
    failed = PerfProfiler(CountingTiming(), task, FakePerfHost("", returncode=1), lambda s: built).profile(solution)
    assert failed.notes[0].startswith("no counters: perf stat counted nothing (exit status 1)")


@pytest.mark.integration
@pytest.mark.skipif(PerfHost().find_perf() is None, reason="perf is not installed")
def test_perf_counts_only_the_kernel_calls(tmp_path: Path) -> None:
    """The real perf over the real kernel: the task clock of 20 calls of a 65536-element scale_add is
    milliseconds, not the second or so that Python's start-up and the inputs take."""
    task = scale_add_task()
    tools = toolbox(tmp_path, task, profiler=PerfProfiler(CountingTiming(), task))
    result = tools.call("profile", {})
    assert not result.is_error, result.content
    assert "perf counters of large-65536, per kernel call (over 20 calls)" in result.content, result.content
    large = result.data["workloads"][1]["metrics"]  # type: ignore[index]
    assert 0 < large["task_clock_ms_per_call"] < 50, large
