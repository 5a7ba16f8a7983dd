"""``evoteam check`` as the editor runs it on save: JSON diagnostics and resources, task constraints, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, TESTS
from evoteam.gpu_bench.build.cuda.nvcc import find_cuobjdump, find_nvcc

pytestmark = [pytest.mark.integration, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]


def check(*args: str | Path, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "check", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "EVOTEAM_CACHE": str(cache)},
    )


def test_json_reports_resources_of_a_good_file(tmp_path: Path) -> None:
    src = tmp_path / "spills.cu"
    shutil.copy(TESTS / "constraints" / "spills.cu", src)
    proc = check(src, "--json", "--arch", "sm_100a", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is True and data["arch"] == "sm_100a"
    assert data["resources"][0]["name"] == "spill" and data["resources"][0]["spill_stores"] > 0


def test_errors_are_listed_with_lines_and_exit_1(tmp_path: Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text('extern "C" __global__ void k(float* x) {\n    x[0] = 1.0f\n}\n')
    proc = check(src, cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert 'bad.cu:3:1: error: expected a ";"' in proc.stdout  # the front end points at the next token
    assert "failed" in proc.stdout


def test_local_headers_resolve(tmp_path: Path) -> None:
    (tmp_path / "scale.cuh").write_text("__device__ inline float twice(float v) { return 2.0f * v; }\n")
    src = tmp_path / "uses_header.cu"
    src.write_text('#include "scale.cuh"\nextern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }\n')
    proc = check(src, "--json", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout


@pytest.mark.skipif(find_cuobjdump() is None, reason="cuobjdump is not installed")
def test_a_task_file_is_checked_against_its_constraints(tmp_path: Path) -> None:
    shutil.copy(TESTS / "constraints" / "wmma_gemm.cu", tmp_path / "gemm.cu")
    shutil.copy(DATA / "scale_add.json", tmp_path / "scale_add.json")
    shutil.copy(DATA / "scale_add.jsonl", tmp_path / "scale_add.jsonl")
    (tmp_path / "evoteam.toml").write_text(
        "[[kernel]]\n"
        'name = "gemm"\nsource = "gemm.cu"\nlanguage = "cuda"\nbinding = "c"\nentry = "tile_gemm"\n'
        'definition = "scale_add.json"\nworkloads = "scale_add.jsonl"\ntarget = "sm_90a"\n'
        "[kernel.constraints]\n"
        'require = ["wgmma.mma_async"]\nforbid = ["wmma.mma"]\n'
    )
    proc = check("gemm.cu", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert "constraint violated" in proc.stdout and "wgmma.mma_async" in proc.stdout and "wmma.mma" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.cu"], "no such file"),
        (["notes.txt"], "cannot check notes.txt"),
        (["k.cu", "--arch", "hopper"], "--arch must look like sm_90a"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k() {}\n')
    proc = check(*args, cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
