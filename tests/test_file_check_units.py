"""How the editor compiles a kernel file that is no task (``server/file_check.py``) and shows its kernels' ptxas
resources (``server/resource_hints.py``): the architecture from a compute capability, flags from a compilation
database, the compile plan, and kernels found and labelled in CUDA text. No compiler runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from evoteam.gpu_bench.api import KernelResources, Language
from evoteam.server.file_check import (
    CompileDatabase,
    arch_of,
    file_solution,
    is_kernel_file,
    kept_flags,
    local_arch,
    plan,
    read_database,
)
from evoteam.server.resource_hints import KernelFacts, base_name, hints, kernel_names, label

pytestmark = pytest.mark.unit


def test_the_architecture_of_a_compute_capability() -> None:
    assert arch_of("9.0") == "sm_90a" and arch_of(" 10.0\n") == "sm_100a" and arch_of("8.6") == "sm_86"
    assert arch_of("N/A") is None and arch_of("") is None


def test_the_local_architecture_is_the_first_gpu_s_or_none() -> None:
    asked: list[list[str]] = []

    def smi(command: list[str]) -> str:
        asked.append(command)
        return "9.0\n9.0\n"

    def missing(command: list[str]) -> str:
        raise FileNotFoundError("nvidia-smi")

    assert local_arch(smi) == "sm_90a" and asked[0][0] == "nvidia-smi"
    assert local_arch(missing) is None and local_arch(lambda c: "") is None


def test_a_database_entry_keeps_includes_defines_and_the_standard_with_absolute_paths(tmp_path: Path) -> None:
    build = tmp_path / "build"
    command = ["-I../include", "-isystem", "/opt/x", "-DN=4", "-D", "M", "-UOLD", "-iquote", "q", "-O2", "-Wall"]
    command += ["-std=c++20", "-o", "out.o", "-c", "a.cpp", "--std=c++17", "-include", "pre.h"]
    flags = kept_flags(command, build)
    include = str((tmp_path / "include").resolve())
    assert flags == [
        "-I",
        include,
        "-isystem",
        "/opt/x",
        "-D",
        "N=4",
        "-D",
        "M",
        "-U",
        "OLD",
        "-I",  # nvcc has no -iquote
        str((build / "q").resolve()),
        "-std=c++20",
        "-std=c++17",
        "-include",
        str((build / "pre.h").resolve()),
    ]


def test_a_database_by_command_or_arguments_and_its_folder_fallback(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    path = tmp_path / "compile_commands.json"
    entries = [
        {"directory": str(tmp_path), "file": "src/a.cu", "command": "nvcc -Iinc -DX=1 -c src/a.cu"},
        {"directory": str(tmp_path), "file": "src/b.cpp", "arguments": ["g++", "-DY", "-c", "src/b.cpp"]},
        "not an entry",
    ]
    path.write_text(json.dumps(entries))
    database = read_database(path)
    assert database.problem is None
    assert database.flags_for(tmp_path / "src" / "a.cu") == ["-I", str(tmp_path / "inc"), "-D", "X=1"]
    assert database.flags_for(tmp_path / "src" / "b.cpp") == ["-D", "Y"]
    assert database.flags_for(tmp_path / "src" / "new.cuh") in (
        database.flags_for(tmp_path / "src" / "a.cu"),
        ["-D", "Y"],
    )
    assert database.flags_for(tmp_path / "elsewhere.cu") == []
    path.write_text("{ broken")
    assert "cannot read" in (read_database(path).problem or "")
    path.write_text("{}")
    assert "not a JSON list" in (read_database(path).problem or "")


def test_the_plan_of_a_file_language_target_and_flags(tmp_path: Path) -> None:
    none = CompileDatabase()
    cu = plan(tmp_path / "k.cu", "", None, [tmp_path / "third"], none)
    assert (cu.language, cu.header, cu.arch) == (Language.CUDA, False, "sm_90a")
    assert cu.flags == ("-O3", f"-I{tmp_path}", f"-I{tmp_path / 'third'}")
    assert plan(tmp_path / "k.cu", "", "sm_80", [], none).arch == "sm_80"
    omp = plan(tmp_path / "k.cpp", "#pragma omp parallel for\n", "sm_80", [], none)
    assert omp.arch == "cpu" and "-fopenmp" in omp.flags
    header = plan(tmp_path / "h.cuh", "__device__ int f();", None, [], none)
    solution = file_solution(header, "__device__ int f();")
    assert [s.path for s in solution.sources] == ["h.cuh", "evoteam_check.cu"]
    assert solution.sources[1].content == '#include "h.cuh"\n'
    assert [s.path for s in file_solution(plan(tmp_path / "h.hpp", "", None, [], none), "").sources][1] == (
        "evoteam_check.cpp"
    )
    assert is_kernel_file(Path("a.cuh")) and is_kernel_file(Path("a.cxx")) and not is_kernel_file(Path("a.h"))


KERNELS = """// a file of kernels
template <int N> __global__ void __launch_bounds__(128, 2) scale(float* x) { x[0] *= N; }
template __global__ void scale<2>(float*);
namespace ns { __global__ void plain(int* y); }
__global__ void ns::plain(int* y) { y[0] = 1; }
__global__ void declared_only(float* z);
"""


def facts(spelled: str, registers: int = 10, **more: int) -> KernelFacts:
    return KernelFacts(spelled, KernelResources(name=spelled, arch="sm_90a", registers=registers, **more))


def test_kernels_are_found_after_launch_bounds_with_their_definitions() -> None:
    found = [(k.name, k.line, k.defined) for k in kernel_names(KERNELS)]
    assert found == [
        ("scale", 1, True),
        ("scale", 2, False),
        ("plain", 3, False),
        ("plain", 4, True),
        ("declared_only", 5, False),
    ]
    line = KERNELS.splitlines()[1]
    assert kernel_names(KERNELS)[0].end == line.index("scale(") + len("scale")


def test_names_of_demangled_kernels() -> None:
    assert base_name("void ns::scale<4, (bool)1>(float*, int)") == "scale"
    assert base_name("add") == "add" and base_name("ns::plain(int*)") == "plain"
    assert base_name("void k<Pair<int, 2> >(Pair<int, 2>*)") == "k"


def test_labels_and_hints_go_on_definitions_and_name_each_instantiation() -> None:
    assert label(facts("a").resources) == "10 regs"
    assert label(facts("a", 40, shared_bytes=4096, spill_stores=24, spill_loads=16).resources) == (
        "40 regs · 4 KiB smem · 24 B spill stores, 16 B loads"
    )
    found = [facts("void scale<2>(float*)", 12), facts("void scale<4>(float*)", 14), facts("ns::plain(int*)", 8)]
    shown = hints(KERNELS, [*found, facts("declared_only(float*)", 9)])
    by_line = {h.position.line: h.label for h in shown}
    assert by_line == {
        1: "ptxas: scale<2>: 12 regs; scale<4>: 14 regs",
        4: "ptxas: 8 regs",
        5: "ptxas: 9 regs",  # declared only: the declaration gets it
    }
    window = lsp.Range(lsp.Position(3, 0), lsp.Position(4, 200))
    assert [h.position.line for h in hints(KERNELS, [facts("ns::plain(int*)")], window)] == [4]
    assert hints(KERNELS, [facts("other(int)")]) == []
