"""``evoteam profile``: ncu's raw CSV parsed into typed reports, the ncu command line, the missing-ncu and no-GPU
errors, the command end to end with a fake host; one GPU test runs the real profiler."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, REPO
from evoteam.cli.main import build_parser
from evoteam.cli.profile import profile_command, select_workload
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.profile.ncu import (
    DEFAULT_SECTIONS,
    FakeHost,
    LocalHost,
    ProfileReport,
    ProfileRequest,
    ProfileUnavailable,
    find_ncu,
    ncu_command,
    profile_workload,
    require_profiler,
)
from evoteam.gpu_bench.profile.ncu_csv import number, parse_raw_csv
from evoteam.gpu_bench.schema import Solution
from evoteam.gpu_bench.task import TaskError, find_task

NCU = DATA / "ncu"
EXAMPLE = REPO / "examples" / "rmsnorm"


def fixture(name: str) -> str:
    return (NCU / name).read_text()


@pytest.mark.unit
def test_raw_page_with_base_units_becomes_typed_sections() -> None:
    kernels, messages = parse_raw_csv(fixture("rmsnorm_cuda_h200.csv"))
    assert len(kernels) == 1
    k = kernels[0]
    assert k.name == "void rmsnorm_kernel<true>(const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *)"
    assert (k.id, k.block_size, k.grid_size, k.compute_capability) == (0, "(256, 1, 1)", "(170, 1, 1)", "9.0")
    assert k.duration_us == pytest.approx(4.128)
    assert k.registers_per_thread == 39
    sol, occ, mem = k.speed_of_light, k.occupancy, k.memory
    assert (sol.sm_throughput_pct, sol.memory_throughput_pct, sol.dram_throughput_pct) == (9.46, 34.12, 14.10)
    assert (sol.l1tex_throughput_pct, sol.l2_throughput_pct) == (21.05, 27.41)
    assert sol.elapsed_cycles == 7245
    assert sol.sm_frequency_hz == pytest.approx(1.755e9)
    assert sol.dram_frequency_hz == pytest.approx(2.619e9)
    assert (occ.theoretical_pct, occ.achieved_pct, occ.achieved_active_warps) == (100, 41.30, 26.43)
    assert (occ.block_limit_registers, occ.block_limit_shared_mem, occ.block_limit_warps, occ.block_limit_sm) == (
        8, 8, 8, 8,
    )  # fmt: skip
    assert (mem.dram_bytes_read, mem.dram_bytes_written) == (1_400_832, 1_392_640)
    assert mem.dram_bandwidth_bytes_per_s == pytest.approx(676.713e9, rel=1e-5)
    assert (mem.l1_hit_rate_pct, mem.l2_hit_rate_pct) == (0.0, 51.23)
    assert k.raw["device__attribute_display_name"] == "NVIDIA H200"
    assert k.raw["dram__bytes_read.sum"] == "1,400,832"
    assert k.units["gpu__time_duration.sum"] == "nsecond" and "Kernel Name" not in k.units
    assert messages[0].startswith("==PROF== Connected") and len(messages) == 3


@pytest.mark.unit
def test_scaled_units_old_metric_names_and_messages_around_the_csv() -> None:
    kernels, messages = parse_raw_csv(fixture("rmsnorm_naive_two_launches.csv"))
    assert [k.id for k in kernels] == [0, 1]
    first, second = kernels
    assert first.duration_us == pytest.approx(668.45) and second.duration_us == pytest.approx(666.80)
    assert first.memory.dram_bytes_read == pytest.approx(2.79e6)
    assert first.memory.dram_bytes_written == pytest.approx(1_392_640)
    assert first.memory.dram_bandwidth_bytes_per_s == pytest.approx(4.18e9)
    assert first.speed_of_light.dram_throughput_pct == 0.09  # the older dram__throughput name
    assert first.speed_of_light.sm_frequency_hz == pytest.approx(1.76e9)
    assert first.speed_of_light.elapsed_cycles == 1_173_900
    assert first.memory.l2_hit_rate_pct == 88.02 and second.memory.l2_hit_rate_pct is None  # "n/a"
    assert first.memory.l1_hit_rate_pct is None  # not collected: absent, not zero
    assert len(messages) == 4 and messages[-1].startswith("==PROF== Disconnected")


@pytest.mark.unit
def test_numbers_and_text_that_is_not_csv() -> None:
    assert number("1,234,567.5") == 1234567.5
    assert number("n/a") is None and number("") is None and number("inf") is None
    assert parse_raw_csv("") == ([], [])
    kernels, messages = parse_raw_csv(fixture("no_kernels.txt"))
    assert kernels == [] and "==WARNING== No kernels were profiled." in messages


@pytest.mark.unit
def test_a_unit_of_the_wrong_dimension_gives_no_value() -> None:
    text = '"ID","Kernel Name","gpu__time_duration.sum"\n"","","byte"\n"0","k","12"\n'
    (kernel,), _ = parse_raw_csv(text)
    assert kernel.duration_us is None and kernel.raw["gpu__time_duration.sum"] == "12"


@pytest.mark.unit
def test_ncu_command_line() -> None:
    command = ncu_command(Path("/opt/ncu"), Path("/tmp/r.json"), Path("/tmp/ncu.csv"), "rmsnorm", python="py")
    assert command == [
        "/opt/ncu",
        "--section", "SpeedOfLight", "--section", "Occupancy", "--section", "MemoryWorkloadAnalysis",
        "--csv", "--page", "raw", "--print-units", "base", "--target-processes", "all",
        "-k", "regex:rmsnorm", "-c", "1", "--log-file", "/tmp/ncu.csv",
        "py", "-m", "evoteam.gpu_bench.profile.target", "/tmp/r.json",
    ]  # fmt: skip
    custom = ncu_command(Path("ncu"), Path("r"), Path("l"), "k.*", sections=["LaunchStats"], count=3)
    assert custom[1:3] == ["--section", "LaunchStats"] and custom[custom.index("-c") + 1] == "3"


@pytest.mark.unit
def test_missing_ncu_or_gpu_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProfileUnavailable, match=r"^Nsight Compute \(ncu\) was not found on PATH"):
        require_profiler(FakeHost(ncu=None))
    with pytest.raises(ProfileUnavailable, match="profiling needs a CUDA GPU: no GPU here"):
        require_profiler(FakeHost(problem="no GPU here"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert find_ncu(path=str(tmp_path), cuda_roots=[tmp_path]) is None
    tool = tmp_path / "bin" / "ncu"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert find_ncu(path="", cuda_roots=[tmp_path]) == tool
    assert find_ncu(path=str(tool.parent), cuda_roots=[]) == tool
    monkeypatch.setenv("EVOTEAM_NCU", str(tmp_path / "nowhere" / "ncu"))
    assert LocalHost().find_ncu() is None
    with pytest.raises(ProfileUnavailable, match=r"EVOTEAM_NCU=.*nowhere/ncu is not executable"):
        require_profiler(LocalHost())


def _request(kernel: str = "rmsnorm_cuda") -> ProfileRequest:
    task = find_task(kernel, EXAMPLE)
    definition = task.load_definition()
    workload = task.load_workloads()[0]
    solution = task.source_solution(definition)
    return ProfileRequest(solution=solution, artifact="/built/kernel.so", definition=definition, workload=workload)


@pytest.mark.unit
def test_profile_workload_runs_ncu_on_the_target_and_reads_its_log() -> None:
    host = FakeHost(csv=fixture("rmsnorm_cuda_h200.csv"))
    request = _request()
    report = profile_workload(host, request, timeout_s=5)
    assert report.error is None and len(report.kernels) == 1
    (command,) = host.commands
    assert command == report.command and command[0] == "/opt/nsight/ncu"
    assert command[command.index("-k") + 1] == "regex:rmsnorm"  # the entry point's name by default
    assert command[-3:-1] == ["-m", "evoteam.gpu_bench.profile.target"]
    assert ProfileRequest.model_validate_json(host.requests[0]) == request
    assert (report.kernel, report.workload, report.axes) == ("rmsnorm_cuda", request.workload.uuid, {"batch_size": 7})
    assert report.sections == list(DEFAULT_SECTIONS)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("host", "reason"),
    [
        (FakeHost(csv=fixture("no_kernels.txt")), "ncu profiled no kernel whose name matches regex:rmsnorm"),
        (FakeHost(csv=fixture("permission_error.txt"), returncode=1), "ERR_NVGPUCTRPERM"),
        (FakeHost(returncode=1, output="profile_target: KernelCallError: entry point returned 700"), "returned 700"),
        (FakeHost(returncode=None), "ncu ran past 5 s"),
    ],
)
def test_a_profile_without_kernels_says_why(host: FakeHost, reason: str) -> None:
    report = profile_workload(host, _request(), timeout_s=5)
    assert report.kernels == [] and report.error is not None and reason in report.error


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["profile", *argv])


def _built(solution: Solution) -> BuildResult:
    return BuildResult(ok=True, artifact=f"/built/{solution.name}.so")


@pytest.mark.unit
def test_profile_command_prints_the_report_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(EXAMPLE)
    host = FakeHost(csv=fixture("rmsnorm_cuda_h200.csv"))
    assert profile_command(_args("rmsnorm_cuda", "--json", "--workload", "1"), host, _built) == 0
    report = ProfileReport.model_validate_json(capsys.readouterr().out)
    assert report.axes == {"batch_size": 1} and report.kernels[0].duration_us == pytest.approx(4.128)
    request = ProfileRequest.model_validate_json(host.requests[0])
    assert request.artifact == "/built/rmsnorm_cuda.so" and request.workload.axes == {"batch_size": 1}


@pytest.mark.unit
def test_profile_command_table_and_failures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(EXAMPLE)
    ok = FakeHost(csv=fixture("rmsnorm_naive_two_launches.csv"))
    assert profile_command(_args("rmsnorm_cuda_naive", "--count", "2"), ok, _built) == 0
    out = capsys.readouterr().out
    assert "rmsnorm_naive_kernel" in out and "668 us" in out and "batch_size=170" in out
    empty = FakeHost(csv=fixture("no_kernels.txt"))
    assert profile_command(_args("rmsnorm_cuda"), empty, _built) == 1
    assert "ncu profiled no kernel" in capsys.readouterr().err

    def broken(solution: Solution) -> BuildResult:
        return BuildResult(ok=False, log="kernel.cu(3): error: expected a ';'")

    assert profile_command(_args("rmsnorm_cuda"), ok, broken) == 1
    err = capsys.readouterr().err
    assert "expected a ';'" in err and "did not build" in err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "host", "message"),
    [
        (["rmsnorm_cuda"], FakeHost(ncu=None), "evoteam profile: error: Nsight Compute (ncu) was not found"),
        (["rmsnorm_cuda"], FakeHost(problem="no CUDA GPU is visible"), "needs a CUDA GPU: no CUDA GPU is visible"),
        (["rmsnorm"], FakeHost(), "targets the CPU"),
        (["rmsnorm_cuda", "--workload", "99"], FakeHost(), "there are only 9 workloads"),
        (["nope"], FakeHost(), "has no kernel named 'nope'"),
    ],
)
def test_bad_input_and_unusable_machines_exit_2(
    argv: list[str],
    host: FakeHost,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(EXAMPLE)
    assert profile_command(_args(*argv), host, _built) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert host.commands == []


@pytest.mark.unit
def test_workload_selection() -> None:
    task = find_task("rmsnorm_cuda", EXAMPLE)
    definition, workloads = task.load_definition(), task.load_workloads()
    assert select_workload(definition, workloads, None).axes == {"batch_size": 170}  # the largest
    assert select_workload(definition, workloads, "2").axes == {"batch_size": 34}
    assert select_workload(definition, workloads, "f7c3b329").axes == {"batch_size": 34}
    assert select_workload(definition, workloads, workloads[4].uuid) == workloads[4]
    with pytest.raises(TaskError, match="no workload has that uuid"):
        select_workload(definition, workloads, "zzz")


@pytest.mark.integration
def test_the_command_without_ncu_exits_2_with_one_line() -> None:
    env = {**os.environ, "EVOTEAM_NCU": "/nonexistent/ncu"}
    proc = subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "profile", "rmsnorm_cuda"],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "evoteam profile: error: Nsight Compute (ncu) is not available: EVOTEAM_NCU=/nonexistent/ncu is not executable"
    )


@pytest.mark.integration
def test_profile_target_refuses_a_bad_request(tmp_path: Path) -> None:
    bad = tmp_path / "request.json"
    bad.write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "evoteam.gpu_bench.profile.target", str(bad)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "bad request" in proc.stderr and proc.stdout == ""


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
@pytest.mark.skipif(LocalHost().find_ncu() is None, reason="needs Nsight Compute (ncu)")
def test_real_profile_of_the_improved_example() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "profile", "rmsnorm_cuda", "--json"],
        cwd=EXAMPLE, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = ProfileReport.model_validate(json.loads(proc.stdout))
    assert report.axes == {"batch_size": 170} and len(report.kernels) == 1
    kernel = report.kernels[0]
    assert "rmsnorm_kernel" in kernel.name and kernel.grid_size.startswith("(170")
    assert kernel.duration_us is not None and 0 < kernel.duration_us < 1000
    assert kernel.speed_of_light.sm_throughput_pct is not None and 0 < kernel.speed_of_light.sm_throughput_pct <= 100
    assert kernel.occupancy.achieved_pct is not None and kernel.occupancy.achieved_pct > 0
    read = kernel.memory.dram_bytes_read
    assert read is not None and read >= 0.5 * 170 * 4096 * 2  # ncu flushes caches before each pass
