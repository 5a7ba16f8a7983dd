"""The CUDA examples of examples/rmsnorm compile for sm_90a (shared library or cubin) with the symbols their
binding calls, and the improved kernel meets the constraints its evoteam.toml entry sets. Compile only: no GPU."""

from __future__ import annotations

import ctypes
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from evoteam.gpu_bench.build.cuda.constraints import check
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc
from evoteam.gpu_bench.schema import Binding, KernelResources, Language
from evoteam.gpu_bench.task import KernelTask, load_tasks

EXAMPLE = REPO / "examples" / "rmsnorm"
NVCC = find_nvcc()
CUDA_TASKS = ["rmsnorm_cuda_naive", "rmsnorm_cuda", "rmsnorm_pycuda"]

pytestmark = [pytest.mark.integration, pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")]


def tasks() -> dict[str, KernelTask]:
    return {t.name: t for t in load_tasks(EXAMPLE / "evoteam.toml")}


@dataclass
class Compiled:
    artifact: Path
    log: str
    resources: list[KernelResources]


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


def ptxas_resources(log: str) -> list[KernelResources]:
    """Registers and spills per kernel from ``-Xptxas -v`` (enough for these checks)."""
    kernels: list[KernelResources] = []
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            kernels.append(KernelResources(name=m.group(1), arch=m.group(2)))
        elif kernels and (m := _SPILLS.search(line)):
            kernels[-1].stack_bytes, kernels[-1].spill_stores, kernels[-1].spill_loads = map(int, m.groups())
        elif kernels and (m := _USED.search(line)):
            kernels[-1].registers = int(m.group(1))
    return kernels


def compile_task(task: KernelTask, out: Path) -> Compiled:
    assert NVCC is not None
    cubin = task.binding == Binding.PYCUDA
    artifact = out / (f"{task.name}.cubin" if cubin else f"{task.name}.so")
    mode = ["-cubin"] if cubin else ["-shared", "-Xcompiler", "-fPIC"]
    cmd = [
        NVCC,
        f"-arch={task.target}",
        "-lineinfo",
        "-Xptxas",
        "-v",
        "-O3",
        *mode,
        "-o",
        str(artifact),
        str(task.source),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "warning" not in log.lower(), log
    return Compiled(artifact, log, ptxas_resources(log))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Compiled]:
    out = tmp_path_factory.mktemp("cuda-examples")
    return {name: compile_task(tasks()[name], out) for name in CUDA_TASKS}


def test_the_cuda_entries_of_the_example() -> None:
    all_tasks = tasks()
    assert {"rmsnorm", "rmsnorm_tuned", "rmsnorm_tvmffi"} <= set(all_tasks)  # the CPU kernels stay
    for name in CUDA_TASKS:
        task = all_tasks[name]
        assert (task.language, task.target, task.entry) == (Language.CUDA, "sm_90a", "rmsnorm")
        assert task.source.is_file()
    assert all_tasks["rmsnorm_cuda"].baseline == "kernel:rmsnorm_cuda_naive"
    assert all_tasks["rmsnorm_pycuda"].binding == Binding.PYCUDA and all_tasks["rmsnorm_pycuda"].launch is not None
    constraints = all_tasks["rmsnorm_cuda"].constraints
    assert constraints.no_spills and constraints.max_registers == 64


@pytest.mark.parametrize("name", ["rmsnorm_cuda_naive", "rmsnorm_cuda"])
def test_c_binding_examples_export_their_host_launcher(name: str, compiled: dict[str, Compiled]) -> None:
    library = ctypes.CDLL(str(compiled[name].artifact))  # loads without a GPU: the CUDA runtime is static
    assert hasattr(library, "rmsnorm")
    kernels = compiled[name].resources
    assert kernels and all(k.arch == "sm_90a" and k.spill_stores == 0 and k.spill_loads == 0 for k in kernels)


def test_pycuda_example_is_a_cubin_with_the_unmangled_kernel(compiled: dict[str, Compiled]) -> None:
    result = compiled["rmsnorm_pycuda"]
    assert result.artifact.read_bytes()[:4] == b"\x7fELF"
    assert [k.name for k in result.resources] == ["rmsnorm"]  # extern "C": the name pycuda looks up
    assert result.resources[0].spill_stores == 0


def test_the_improved_kernel_meets_its_constraints(compiled: dict[str, Compiled], tmp_path: Path) -> None:
    task = tasks()["rmsnorm_cuda"]
    assert NVCC is not None
    ptx = tmp_path / "kernel.ptx"
    subprocess.run([NVCC, "-arch=sm_90a", "-O3", "-ptx", "-o", str(ptx), str(task.source)], check=True, timeout=300)
    resources = compiled["rmsnorm_cuda"].resources
    assert len(resources) == 2  # the 16-byte-aligned vector path and the scalar fallback
    assert check(task.constraints, ptx.read_text(), "", resources) == []
    # and the constraints have teeth: the naive kernel has no 128-bit accesses
    naive = tmp_path / "naive.ptx"
    subprocess.run(
        [NVCC, "-arch=sm_90a", "-O3", "-ptx", "-o", str(naive), str(tasks()["rmsnorm_cuda_naive"].source)],
        check=True,
        timeout=300,
    )
    assert len(check(task.constraints, naive.read_text(), "", compiled["rmsnorm_cuda_naive"].resources)) == 2


def test_evoteam_check_accepts_every_cuda_example(tmp_path: Path) -> None:
    """The project's own compile-only path (``evoteam check``) on the same files, with the task's constraints."""
    from evoteam.gpu_bench.build.check import check_file

    for name in CUDA_TASKS:
        result = check_file(tasks()[name].source, cache_root=tmp_path)
        assert result.ok, result.log
        assert result.violations == [], result.violations
        assert result.resources and all(r.spill_stores == 0 for r in result.resources)
