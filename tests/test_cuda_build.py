"""nvcc builds of CUDA solutions (no GPU needed): artifacts, ptxas resources, PTX kept, the build cache,
and constraints checked on PTX/SASS, which make the evaluator REJECT a candidate without running it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TESTS, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.builder import BuildResult, build
from evoteam.gpu_bench.build.check import check_solution
from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.build.cuda.instruction_classes import downgrades
from evoteam.gpu_bench.build.cuda.nvcc import find_cuobjdump, find_nvcc
from evoteam.gpu_bench.runner import SolutionRun, WorkloadRun
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    Environment,
    EvaluationStatus,
    KernelResources,
    Language,
    Severity,
    Solution,
    SourceFile,
    Workload,
)
from evoteam.gpu_bench.timing.statistics import TimingStats
from evoteam.gpu_bench.worker.evaluate import WorkloadOutcome

pytestmark = [pytest.mark.integration, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]
needs_cuobjdump = pytest.mark.skipif(find_cuobjdump() is None, reason="cuobjdump is not installed")
KERNELS = TESTS / "constraints"


def cuda_solution(
    filename: str, symbol: str, binding: Binding = Binding.C, arch: str = "sm_90a", content: str | None = None
) -> Solution:
    spec = BuildSpec(
        language=Language.CUDA,
        target_hardware=[arch],
        entry_point=f"{filename}::{symbol}",
        binding=binding,
        compile_flags=["-O2"],
    )
    text = content if content is not None else (KERNELS / filename).read_text()
    return Solution(
        name=Path(filename).stem,
        definition="scale_add_f32",
        author="tests",
        spec=spec,
        sources=[SourceFile(path=filename, content=text)],
    )


def test_c_binding_builds_a_shared_library_with_resources_and_ptx(tmp_path: Path) -> None:
    result = build(cuda_solution("wgmma_tile.cu", "tile_wgmma"), tmp_path)
    assert result.ok, result.log
    assert result.artifact is not None and result.artifact.endswith("kernel.so") and Path(result.artifact).is_file()
    assert result.arch == "sm_90a"
    assert [r.name for r in result.resources] == ["tile_wgmma"]
    assert result.resources[0].arch == "sm_90a" and result.resources[0].registers > 0
    assert result.ptx is not None and "wgmma.mma_async" in Path(result.ptx).read_text()
    again = build(cuda_solution("wgmma_tile.cu", "tile_wgmma"), tmp_path)
    assert again.cached and again.resources == result.resources and again.artifact == result.artifact


def test_pycuda_binding_builds_a_cubin_for_the_target_arch(tmp_path: Path) -> None:
    result = build(cuda_solution("wmma_gemm.cu", "tile_gemm", Binding.PYCUDA, arch="sm_100a"), tmp_path)
    assert result.ok, result.log
    assert result.artifact is not None and result.artifact.endswith("kernel.cubin")
    assert result.arch == "sm_100a" and result.resources[0].arch == "sm_100a"


def test_compile_error_gives_structured_diagnostics(tmp_path: Path) -> None:
    broken = 'extern "C" __global__ void k(float* x) {\n    x[threadIdx.x] = undefined_name;\n}\n'
    result = build(cuda_solution("broken.cu", "k", content=broken), tmp_path)
    assert not result.ok
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert errors and errors[0].file == "broken.cu" and errors[0].line == 2
    assert "undefined_name" in errors[0].message


def test_resources_show_spills(tmp_path: Path) -> None:
    result = build(cuda_solution("spills.cu", "spill"), tmp_path)
    assert result.ok, result.log
    (spill,) = result.resources
    assert spill.spill_stores > 0 and spill.spill_loads > 0 and spill.stack_bytes > 0


@needs_cuobjdump
def test_constraints_on_ptx_and_sass(tmp_path: Path) -> None:
    wmma = cuda_solution("wmma_gemm.cu", "tile_gemm")
    wgmma = cuda_solution("wgmma_tile.cu", "tile_wgmma")
    hard_design = Constraints(require=["wgmma.mma_async", "HGMMA"], forbid=["wmma.mma", "HMMA"])
    downgraded = check_solution(wmma, hard_design, tmp_path)
    assert downgraded.ok
    assert sorted(downgraded.violations) == sorted(
        [
            "required instruction 'wgmma.mma_async' does not appear in the generated PTX/SASS",
            "required instruction 'HGMMA' does not appear in the generated PTX/SASS",
            "forbidden instruction 'wmma.mma' appears in the generated PTX/SASS",
            "forbidden instruction 'HMMA' appears in the generated PTX/SASS",
        ]
    )
    held = check_solution(wgmma, hard_design, tmp_path)
    assert held.ok and held.violations == [] and held.notes == []
    artifact = build(wgmma, tmp_path).artifact
    assert artifact is not None and Path(artifact).with_suffix(".sass").is_file()  # disassembled once, kept


def test_register_and_spill_constraints(tmp_path: Path) -> None:
    checked = check_solution(cuda_solution("spills.cu", "spill"), Constraints(no_spills=True, max_registers=16))
    assert checked.ok
    assert any("spills" in v for v in checked.violations)
    assert any("registers, more than the limit of 16" in v for v in checked.violations)


class _NoRun:
    """A runner that must not be used: a violating candidate is rejected before anything runs."""

    def run(self, *args: object, **kwargs: object) -> SolutionRun:
        raise AssertionError("the candidate ran although it violates a constraint")

    def close(self) -> None:
        return None


def test_evaluator_rejects_a_violating_candidate_without_running_it(
    tmp_path: Path, definition: Definition, workloads: list[Workload]
) -> None:
    evaluator = Evaluator(_NoRun(), cache_root=tmp_path)  # type: ignore[arg-type]
    candidate = cuda_solution("spills.cu", "spill")
    result = evaluator.evaluate(
        definition, workloads, candidate, candidate, quick_config(), constraints=Constraints(no_spills=True)
    )
    assert result.status == EvaluationStatus.REJECTED
    assert result.violations and "spill" in result.violations[0]
    assert all(w.status == EvaluationStatus.REJECTED and "constraint violated" in w.reason for w in result.workloads)
    assert all(t.evaluation is not None and t.evaluation.status == EvaluationStatus.REJECTED for t in result.traces)
    assert result.resources and result.resources[0].spill_stores > 0


class _BuiltElsewhere:
    """A runner whose host compiled and ran the candidate (as a remote GPU host does), reporting ptxas facts."""

    def __init__(self, resources: list[KernelResources]) -> None:
        self.resources = resources

    def run(
        self, definition: Definition, workloads: list[Workload], solution: Solution, *args: object, **kw: object
    ) -> SolutionRun:
        build = BuildResult(ok=True, artifact="kernel.so", resources=self.resources, arch="sm_90a")
        passed = WorkloadOutcome(status=EvaluationStatus.PASSED, timing=TimingStats(
            median_ms=1.0, p20_ms=1.0, p80_ms=1.0, n=10, noise=0.0, warmup_calls=3))  # fmt: skip
        return SolutionRun(
            solution=solution,
            build=build,
            environment=Environment(hardware="GPU: remote"),
            workloads=[WorkloadRun(workload=w, outcome=passed) for w in workloads],
        )

    def close(self) -> None:
        return None


def test_constraints_still_hold_when_only_the_remote_host_can_compile(
    tmp_path: Path, definition: Definition, workloads: list[Workload], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc-here"))  # this machine cannot compile the candidate
    spilling = KernelResources(name="spill", arch="sm_90a", registers=32, spill_stores=8, spill_loads=8)
    evaluator = Evaluator(_BuiltElsewhere([spilling]), cache_root=tmp_path)  # type: ignore[arg-type]
    candidate = cuda_solution("spills.cu", "spill")
    only_facts = evaluator.evaluate(
        definition, workloads, candidate, candidate, quick_config(), constraints=Constraints(no_spills=True)
    )
    assert only_facts.status == EvaluationStatus.REJECTED
    assert only_facts.violations == ["kernel spill spills (8 bytes stored, 8 bytes loaded) but spills are forbidden"]
    code = evaluator.evaluate(
        definition, workloads, candidate, candidate, quick_config(), constraints=Constraints(require=["HGMMA"])
    )
    assert code.status == EvaluationStatus.REJECTED
    assert code.violations[0].startswith("cannot verify 'HGMMA' in the generated code: this machine could not compile")
    clean = Evaluator(_BuiltElsewhere([]), cache_root=tmp_path)  # type: ignore[arg-type]
    held = clean.evaluate(
        definition, workloads, candidate, candidate, quick_config(), constraints=Constraints(max_registers=64)
    )
    assert held.status == EvaluationStatus.PASSED and held.violations == []


PIPELINE_COPY = """// A tile staged through shared memory with __pipeline_memcpy_async (cp.async in PTX).
#include <cuda_pipeline.h>

extern "C" __global__ void staged(const float4* x, float4* out) {
    __shared__ float4 tile[128];
    asm volatile("// wgmma.mma_async.sync.aligned: a PTX comment is not an instruction");
    __pipeline_memcpy_async(&tile[threadIdx.x], &x[threadIdx.x], sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[threadIdx.x] = tile[threadIdx.x];
}
"""


def test_a_build_records_the_instruction_classes_nvcc_emitted(tmp_path: Path) -> None:
    """What the supervisor compares a candidate with the best on: the classes in the PTX nvcc emitted (the
    fallback from WGMMA to WMMA is seen there), not the names in the source."""
    wgmma = build(cuda_solution("wgmma_tile.cu", "tile_wgmma"), tmp_path)
    wmma = build(cuda_solution("wmma_gemm.cu", "tile_gemm"), tmp_path)
    staged = build(cuda_solution("staged.cu", "staged", content=PIPELINE_COPY), tmp_path)
    assert wgmma.ok and wmma.ok and staged.ok, (wgmma.log, wmma.log, staged.log)
    assert "wgmma" in wgmma.instruction_classes and "wmma" not in wgmma.instruction_classes
    assert wmma.instruction_classes == ["wmma"]
    assert staged.instruction_classes == ["cp.async"]  # the comment naming wgmma.mma_async is not counted
    assert downgrades(wgmma.instruction_classes, wmma.instruction_classes) == ["wgmma → wmma"]
    again = build(cuda_solution("wmma_gemm.cu", "tile_gemm"), tmp_path)
    assert again.cached and again.instruction_classes == ["wmma"]
