"""The GPU device-check script: valid bash, and on a machine without a GPU it compiles the CUDA examples, checks
the offline wheel folder (an incomplete one fails the check) and stops with exit 3 and a clear message; the
figures table it ends with, from recorded bench output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, benchmark_script
from evoteam.gpu_bench.device_compare import (
    SKIPPED,
    Comparison,
    Roofline,
    RooflinePoint,
    WorkloadTiming,
    figure_lines,
    figures_rows,
    main,
)
from wheel_files import complete_folder, make_sdist

SCRIPT = REPO / "gpu_bench" / "device_check.sh"


@pytest.mark.integration
def test_the_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_without_a_gpu_it_compiles_the_examples_checks_the_wheel_folder_then_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "out"
    wheels = complete_folder(tmp_path / "wheels", REPO / "pyproject.toml")
    env = {**os.environ, "OUT": str(out), "CUDA_VISIBLE_DEVICES": "", "EVOTEAM_WHEELS": str(wheels)}  # no GPU shown
    proc = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("device check: no GPU on this machine (CUDA_VISIBLE_DEVICES is set to ''")
    assert "the wheel folder is complete; the GPU steps did not run" in last
    assert any(line.split()[:2] == ["wheels", "ok"] for line in proc.stdout.splitlines())
    assert f"{wheels}: " in proc.stdout and "built there from source: pycuda" in proc.stdout
    nvcc_found = "nvcc: not found" not in proc.stdout
    for kernel in ("rmsnorm_cuda_naive", "rmsnorm_cuda", "rmsnorm_pycuda"):
        if nvcc_found:
            assert any(line.split()[:2] == [f"compile-{kernel}", "ok"] for line in proc.stdout.splitlines())
            assert (out / "logs" / f"compile-{kernel}.log").is_file()
    if nvcc_found:
        assert "Used 39 registers" in proc.stdout  # the improved kernel's ptxas report is shown
    assert "== nvidia-smi" not in proc.stdout and "== bench" not in proc.stdout
    assert not list(out.glob("bench_*.json"))


@pytest.mark.integration
def test_an_incomplete_wheel_folder_fails_the_check_before_any_gpu_step(tmp_path: Path) -> None:
    wheels = complete_folder(tmp_path / "wheels", REPO / "pyproject.toml")
    next(wheels.glob("pydantic-*.whl")).unlink()
    env = {**os.environ, "OUT": str(tmp_path / "out"), "CUDA_VISIBLE_DEVICES": "", "EVOTEAM_WHEELS": str(wheels)}
    proc = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "missing: pydantic>=2.7 (needed by evoteam)" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("device check: a step failed")
    env["EVOTEAM_WHEELS"] = str(tmp_path / "nowhere")
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 2 and "EVOTEAM_WHEELS: no folder at" in proc.stdout


@pytest.mark.integration
def test_building_pycuda_says_what_it_lacks(tmp_path: Path) -> None:
    script = REPO / "gpu_bench" / "build_pycuda.sh"
    wheels, root = tmp_path / "wheels", tmp_path / "cuda"
    wheels.mkdir()
    root.mkdir()

    def run() -> subprocess.CompletedProcess[str]:
        command = ["bash", str(script), sys.executable, str(wheels), str(tmp_path / "out"), str(root)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    proc = run()
    assert proc.returncode == 1 and "no pycuda source archive (pycuda-*.tar.gz) in" in proc.stderr
    make_sdist(wheels, "pycuda", "2026.1")
    proc = run()
    assert proc.returncode == 1 and f"no CUDA toolkit at {root} (no include/cuda.h)" in proc.stderr
    (root / "include").mkdir()
    (root / "include" / "cuda.h").write_text("")
    if not _driver_library():  # where the driver is installed, the build would go on and use it
        proc = run()
        assert proc.returncode == 1 and f"no libcuda.so (the CUDA driver library) in {root}'s lib" in proc.stderr


def _driver_library() -> bool:
    listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    places = ("/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
    return "libcuda.so.1 " in listed or any((Path(p) / "libcuda.so.1").exists() for p in places)


def _bench_payload(medians_ms: list[float], speedup: float | None, failed: int = 0) -> dict[str, object]:
    workloads: list[dict[str, object]] = [
        {"uuid": f"w{i}", "axes": {"batch_size": i}, "status": "PASSED", "timing": {"median_ms": m}}
        for i, m in enumerate(medians_ms)
    ]
    workloads += [{"uuid": f"f{i}", "axes": {}, "status": "INCORRECT_NUMERICAL", "timing": None} for i in range(failed)]
    return {"status": "PASSED", "summary": {"geomean_speedup": speedup}, "traces": [], "workloads": workloads}


@pytest.mark.unit
def test_figures_table_from_recorded_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bench_rmsnorm_cuda.json").write_text(json.dumps(_bench_payload([0.004, 0.006, 0.010], 25.0)))
    (tmp_path / "bench_rmsnorm_pycuda.json").write_text(json.dumps(_bench_payload([0.005], None, failed=2)))
    (tmp_path / "bench_rmsnorm_cuda_naive.json").write_text("")  # the step failed before printing
    comparison = Comparison(
        kernel="rmsnorm_cuda",
        workloads=[
            WorkloadTiming(uuid="a", axes={}, ours_ms=0.0042, do_bench_ms=0.0040, status="PASSED"),
            WorkloadTiming(uuid="b", axes={}, ours_ms=0.0099, do_bench_ms=0.0110, status="PASSED"),
        ],
    )
    (tmp_path / "compare.json").write_text(comparison.model_dump_json())
    rows = {row[0]: row for row in figures_rows(tmp_path)}
    assert rows["rmsnorm_cuda"] == ["rmsnorm_cuda", "3", "6.00", "25.00x", "0.972", "3 passed, 0 failed"]
    assert rows["rmsnorm_pycuda"] == ["rmsnorm_pycuda", "3", "5.00", "-", "-", "1 passed, 2 failed"]
    assert rows["rmsnorm_cuda_naive"][-1] == "no result (see its log)"
    assert main(["table", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split() == ["kernel", "workloads", "median", "us", "speedup", "(geomean)",
                                               "ours/do_bench", "pass/fail"]  # fmt: skip
    assert "25.00x" in printed


@pytest.mark.unit
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
def test_compare_skips_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--root", str(REPO / "examples" / "rmsnorm")]) == 3
    assert "skipped" in capsys.readouterr().err


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_adversarial_gpu" name="test_cheat[gpu_private_stream.cu-another stream]">
<failure message="assert PASSED != PASSED"/></testcase>
<testcase classname="tests.test_adversarial_gpu" name="test_a_gpu_cheat_is_rejected[gpu_pointer_cache.cu-x]"/>
<testcase classname="tests.test_gpu_runtime" name="test_sync"/>
<testcase classname="tests.test_profile" name="test_ncu"><skipped message="needs ncu"/></testcase>
</testsuite></testsuites>"""


@pytest.mark.unit
def test_the_other_figures_from_recorded_files(tmp_path: Path) -> None:
    assert figure_lines(tmp_path) == [
        f"{label}: not run"
        for label in (
            "identical kernels", "ours / do_bench", "roofline", "ncu", "GPU tests", "offline team", "host timing"
        )
    ]  # fmt: skip
    rows = [
        {"kernel": "rmsnorm_cuda", "workload": "batch_size=1", "paired": 0.99, "ci": [0.98, 1.01], "unpaired": 1.2},
        {"kernel": "rmsnorm_cuda", "workload": "batch_size=7", "paired": 1.04, "ci": [1.02, 1.06], "unpaired": 0.9},
    ]
    (tmp_path / "identical.json").write_text(json.dumps(rows))
    comparison = Comparison(
        kernel="rmsnorm_cuda",
        workloads=[
            WorkloadTiming(uuid="a", axes={"batch_size": 1}, ours_ms=0.0042, do_bench_ms=0.0040, status="PASSED"),
            WorkloadTiming(uuid="b", axes={"batch_size": 7}, ours_ms=None, do_bench_ms=0.0110, status="TIMEOUT"),
        ],
    )
    (tmp_path / "compare.json").write_text(comparison.model_dump_json())
    point = RooflinePoint(axes={"batch_size": 16384}, bytes=2 * 16384 * 4096 * 2, median_ms=0.05, status="PASSED")
    failed = RooflinePoint(axes={"batch_size": 65536}, bytes=1, median_ms=None, status="TIMEOUT slow")
    roof = Roofline(kernel="rmsnorm_cuda", device="cuda", copy_gbps=4000.0, copy_bytes=2**30, seconds=12.5,
                    points=[point, failed])  # fmt: skip
    (tmp_path / "roofline.json").write_text(roof.model_dump_json())
    kernel = {"name": "rmsnorm_kernel", "duration_us": 12.5, "memory": {"dram_bytes_read": 1e6}}
    (tmp_path / "profile_rmsnorm_cuda.json").write_text(json.dumps({"kernels": [kernel]}))
    (tmp_path / "pytest-gpu.xml").write_text(JUNIT)
    run = {"config": {"kernel": "rmsnorm_cuda_naive"}, "rounds": [{}, {}], "best": "r02-x", "best_speedup": 2.0,
           "start": {"geomean_speedup": 0.25}}  # fmt: skip
    (tmp_path / "evolve.json").write_text(json.dumps(run))
    row = {"here": 4.0, "host": 4.1, "empty round trip": 20.0, "round trip": 12.0, "do_bench": None}
    (tmp_path / "host_timing.json").write_text(json.dumps({"device": "H100", "rows": {"1024": row}}))
    lines = figure_lines(tmp_path)
    assert lines.pop() == "host timing: 1024 elements, 4.0 us here (round trip 20.0 us): host 1.02x, round trip 3.00x"
    assert lines == [
        "identical kernels: rmsnorm_cuda against a copy: paired ratios 0.990-1.040 over 2 workloads, 1/2 intervals "
        "hold 1",
        "ours / do_bench: rmsnorm_cuda: batch_size=1 1.050; batch_size=7 - (1/2 within 5%)",
        "roofline: copy 4000 GB/s (cuda)",
        "roofline: rmsnorm_cuda batch_size=16384: 256.0 MiB moved in 0.0500 ms: 5369 GB/s, 134% of the copy's "
        "4000 GB/s",
        "roofline: rmsnorm_cuda batch_size=65536: TIMEOUT slow",
        "roofline: (all points benched in 12.5 s: build, inputs, verification, timing)",
        "ncu: rmsnorm_kernel: duration 12.5 us, DRAM bytes read 1000000.0, written MISSING",
        "GPU tests: 2 passed, 1 failed, 1 skipped; the private-stream kernel: NOT rejected (its test failed)",
        "offline team: rmsnorm_cuda_naive, 2 round(s): best r02-x at 2.000x of the start, which is 0.250x of the "
        "baseline: 0.500x of the baseline",
    ]
    (tmp_path / "evolve.json").write_text(json.dumps({**run, "best": None, "best_speedup": None}))
    (tmp_path / "pytest-gpu.xml").write_text("<testsuites><testsuite")
    (tmp_path / "host_timing.json").unlink()
    lines = figure_lines(tmp_path)[:-1]
    assert lines[-1] == "offline team: rmsnorm_cuda_naive, 2 round(s): no improvement over the start, which is " \
        "0.250x of the baseline"  # fmt: skip
    assert lines[-2].startswith("GPU tests: unreadable (ParseError")


@pytest.mark.integration
def test_the_roofline_runs_on_the_cpu_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "roofline.json"
    root = REPO / "examples" / "rmsnorm"
    args = ["roofline", "--kernel", "rmsnorm", "--root", str(root), "--values", "16,64", "--copy-mib", "16"]
    assert main([*args, "--max-time", "0.05", "--json", str(out)]) == 0
    result = Roofline.model_validate_json(out.read_text())
    assert result.device == "cpu" and result.copy_gbps > 0
    assert [p.axes["batch_size"] for p in result.points] == [16, 64]
    assert [p.bytes for p in result.points] == [(2 * n * 4096 + 4096) * 2 for n in (16, 64)]  # bf16 in, weight, out
    assert all(p.status.startswith("PASSED") and p.gbps for p in result.points)
    assert "of the copy's" in capsys.readouterr().out
    assert main(["roofline", "--kernel", "rmsnorm", "--root", str(root), "--axis", "rows"]) == 2
    assert main(["roofline", "--kernel", "rmsnorm_cuda", "--root", str(root)]) in (SKIPPED, 0, 1)  # no GPU: skipped


@pytest.mark.integration
def test_self_consistency_writes_its_rows_for_the_figures(tmp_path: Path) -> None:
    out = tmp_path / "identical.json"
    with benchmark_script("self_consistency") as module:
        args = ["--kernels", "rmsnorm", "--burners", "0", "--max-time", "0.05", "--workloads", "2"]
        assert module.main([*args, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["kernel"] for r in rows] == ["rmsnorm", "rmsnorm"]
    assert all(r["paired"] > 0 and len(r["ci"]) == 2 for r in rows)
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "identical.json").write_text(out.read_text())
    assert figure_lines(tmp_path / "figures")[0].startswith("identical kernels: rmsnorm against a copy: paired ratios")


@pytest.mark.integration
def test_host_timing_runs_its_steps_on_the_cpu_and_skips_without_a_gpu(tmp_path: Path) -> None:
    """``benchmarks/gpu_host_timing.py``: a host process of its own, round trips, a table and its JSON (the
    device check's figure); without a GPU and ``--device cpu`` it skips (exit 3)."""
    script = str(REPO / "benchmarks" / "gpu_host_timing.py")
    out = tmp_path / "host_timing.json"
    done = subprocess.run(
        [sys.executable, script, "--device", "cpu", "--sizes", "1024", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| 1024 |" in done.stdout and "round trip / 100" in done.stdout
    row = json.loads(out.read_text())["rows"]["1024"]
    assert row["here"] > 0 and row["host"] > 0 and row["empty round trip"] > 0 and row["do_bench"] is None
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "host_timing.json").write_text(out.read_text())
    assert figure_lines(tmp_path / "figures")[-1].startswith("host timing: 1024 elements, ")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    skipped = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert skipped.returncode == 3 and "no GPU here" in skipped.stdout
