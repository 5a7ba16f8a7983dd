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

from conftest import REPO
from evoteam.gpu_bench.device_compare import Comparison, WorkloadTiming, figures_rows, main
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
