"""ptxas ``-v`` output → KernelResources, on recorded real output and on nvcc run now (skipped without nvcc)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

import cuda_recordings as recordings
import pytest

from evoteam.gpu_bench.build.cuda import resources
from evoteam.gpu_bench.build.cuda.resources import demangle, parse_resources
from evoteam.gpu_bench.schema import KernelResources

CUDA = Path(__file__).parent / "cuda"


class Source(Protocol):
    kind: str

    def missing(self, name: str) -> str | None: ...
    def output(self, name: str) -> str: ...


class Compiler:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.recorded = source.kind == "recorded"

    def kernels(self, name: str) -> list[KernelResources]:
        missing = self.source.missing(name)
        if missing:
            pytest.skip(f"{missing} is not installed")
        return parse_resources(self.source.output(name))


# The tier comes with the compiler: recorded outputs are unit tests, the live compiler (nvcc) an integration one.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("recorded", marks=pytest.mark.unit),
        pytest.param("live", marks=[pytest.mark.slow, pytest.mark.integration]),
    ],
)
def compiler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    if request.param == "recorded":
        return Compiler(recordings.Recorded())
    return Compiler(recordings.Live(tmp_path_factory.mktemp("cuda-build")))


@pytest.mark.parametrize("name", ["spill", "spill_maxrregcount"])
def test_spilling_kernel(compiler: Compiler, name: str) -> None:
    (kernel,) = compiler.kernels(name)
    assert (kernel.name, kernel.arch) == ("_Z5spillPKfPfi", "sm_90a")
    assert kernel.registers <= 32  # __launch_bounds__(1024, 2) leaves 32 registers a thread
    assert kernel.spill_stores > 0 and kernel.spill_loads > 0
    assert kernel.stack_bytes >= 64 * 4  # the local array lives on the stack
    assert (kernel.shared_bytes, kernel.barriers) == (0, 0)
    if compiler.recorded:
        assert (kernel.registers, kernel.spill_stores, kernel.spill_loads, kernel.stack_bytes) == (32, 1920, 3996, 2144)


def test_shared_memory_kernel_without_its_device_function(compiler: Compiler) -> None:
    (kernel,) = compiler.kernels("shared_sync")  # blend's "Function properties" are not a kernel
    assert (kernel.name, kernel.arch, kernel.shared_bytes, kernel.barriers) == (
        "_Z13reverse_blockPf",
        "sm_90a",
        1152,
        1,
    )
    assert (kernel.spill_stores, kernel.spill_loads, kernel.stack_bytes) == (0, 0, 0)
    assert kernel.registers > 0
    if compiler.recorded:
        assert kernel.registers == 12


def test_device_function_properties_before_the_entry_with_rdc(compiler: Compiler) -> None:
    (kernel,) = compiler.kernels("shared_sync_rdc")
    assert (kernel.name, kernel.shared_bytes, kernel.barriers) == ("_Z13reverse_blockPf", 1152, 1)
    if compiler.recorded:
        assert kernel.registers == 24


def test_one_entry_per_gencode_target(compiler: Compiler) -> None:
    sm80, sm90 = compiler.kernels("shared_sync_gencode")
    assert (sm80.name, sm80.arch, sm90.name, sm90.arch) == (
        "_Z13reverse_blockPf",
        "sm_80",
        "_Z13reverse_blockPf",
        "sm_90a",
    )
    assert sm80.shared_bytes == sm90.shared_bytes == 1152
    assert sm80.constant_bytes > 0  # sm_80 reports the parameter bank cmem[0]; sm_90 does not
    if compiler.recorded:
        assert (sm80.registers, sm80.constant_bytes, sm90.registers, sm90.constant_bytes) == (10, 360, 12, 0)


def test_template_kernel_instantiations(compiler: Compiler) -> None:
    kernels = {k.name: k for k in compiler.kernels("template_kernel")}
    assert set(kernels) == {"_Z5scaleIfLi128EEvPKT_PS0_S0_i", "_Z5scaleIdLi64EEvPKT_PS0_S0_i"}
    assert {(k.shared_bytes, k.barriers) for k in kernels.values()} == {(512, 1)}


def test_resources_are_reported_for_a_kernel_ptxas_rejects(compiler: Compiler) -> None:
    (kernel,) = compiler.kernels("too_much_shared")
    assert (kernel.name, kernel.shared_bytes) == ("_Z3hogPf", 240000)


def test_failed_compiles_have_no_resources(compiler: Compiler) -> None:
    assert compiler.kernels("undefined_identifier") == []
    assert compiler.kernels("bad_inline_ptx") == []


# --- other shapes ptxas prints across versions (short texts) ---


@pytest.mark.unit
def test_older_format_without_barriers_and_several_constant_banks() -> None:
    text = (
        "ptxas info    : Compiling entry function '_Z3addPKfPfi' for 'sm_70'\n"
        "ptxas info    : Function properties for _Z3addPKfPfi\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 10 registers, 1024 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]\n"
    )
    assert parse_resources(text) == [
        KernelResources(name="_Z3addPKfPfi", arch="sm_70", registers=10, shared_bytes=1024, constant_bytes=388)
    ]


@pytest.mark.unit
def test_barriers_after_shared_memory_and_default_arch() -> None:
    text = (
        "ptxas info    : Compiling entry function 'k'\n"
        "ptxas info    : Used 6 registers, 16+16 bytes smem, used 2 barriers, 8 bytes lmem\n"
    )
    assert parse_resources(text, default_arch="sm_86") == [
        KernelResources(name="k", arch="sm_86", registers=6, shared_bytes=32, barriers=2, stack_bytes=8)
    ]


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not installed")
@pytest.mark.integration
def test_demangle_with_cxxfilt() -> None:
    names = ["_Z5scaleIfLi128EEvPKT_PS0_S0_i", "_Z13reverse_blockPf", "plain_c_kernel"]
    assert demangle(names) == {
        "_Z5scaleIfLi128EEvPKT_PS0_S0_i": "void scale<float, 128>(float const*, float*, float, int)",
        "_Z13reverse_blockPf": "reverse_block(float*)",
        "plain_c_kernel": "plain_c_kernel",
    }


@pytest.mark.unit
def test_demangle_without_cxxfilt_returns_names_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources.shutil, "which", lambda _name: None)
    assert demangle(["_Z13reverse_blockPf"]) == {"_Z13reverse_blockPf": "_Z13reverse_blockPf"}
    assert demangle([]) == {}
