"""Constraints on generated code: required and forbidden instructions, register and spill limits."""

from __future__ import annotations

import pytest

from evoteam.gpu_bench.build.cuda.constraints import Constraints, check
from evoteam.gpu_bench.schema import KernelResources

pytestmark = pytest.mark.unit

PTX_WMMA = """
.visible .entry tile_gemm(
\t.param .u64 tile_gemm_param_0
)
{
\t.loc\t1 12 5
\twmma.load.a.sync.aligned.row.m16n16k16.bf16 \t{%r2, %r3, %r4, %r5}, [%rd1], %r1;
\twmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 {%f1}, {%r2}, {%r6}, {%f0};
\t// wgmma.mma_async would be better here
}
"""
SASS_HGMMA = "        /*0060*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;  /* 0x0 */"


def _kernel(**facts: int) -> KernelResources:
    return KernelResources(name="k", arch="sm_90a", **facts)


def test_required_instruction_missing_is_a_violation_even_if_a_comment_names_it() -> None:
    violations = check(Constraints(require=["wgmma.mma_async"]), PTX_WMMA, "", [])
    assert violations == ["required instruction 'wgmma.mma_async' does not appear in the generated PTX/SASS"]


def test_forbidden_instruction_present_is_a_violation() -> None:
    violations = check(Constraints(forbid=["wmma.mma"]), PTX_WMMA, "", [])
    assert violations == ["forbidden instruction 'wmma.mma' appears in the generated PTX/SASS"]


def test_sass_counts_for_require_and_forbid() -> None:
    assert check(Constraints(require=["HGMMA"]), "", SASS_HGMMA, []) == []
    assert check(Constraints(forbid=["HGMMA"]), "", SASS_HGMMA, []) != []


def test_file_names_and_kernel_names_do_not_satisfy_a_requirement() -> None:
    ptx = '.file\t1 "wgmma.mma_async.cu"\n.visible .entry wgmma_kernel(\n)\n{\n\tret;\n}\n'
    assert check(Constraints(require=["wgmma.mma_async"]), ptx, "\t\tFunction : wgmma_kernel\n", []) != []
    assert check(Constraints(require=["wgmma"]), ptx, "\t\tFunction : wgmma_kernel\n", []) != []


def test_register_limit_and_spills() -> None:
    kernels = [_kernel(registers=96, spill_stores=8, spill_loads=4), _kernel(registers=40)]
    violations = check(Constraints(max_registers=64, no_spills=True), "", "", kernels)
    assert violations == [
        "kernel k uses 96 registers, more than the limit of 64",
        "kernel k spills (8 bytes stored, 4 bytes loaded) but spills are forbidden",
    ]
    assert check(Constraints(max_registers=96, no_spills=False), "", "", kernels) == []


def test_empty_constraints() -> None:
    assert Constraints().is_empty()
    assert not Constraints(no_spills=True).is_empty()
    assert not Constraints(no_spills=True).needs_code()
    assert Constraints(forbid=["wmma.mma"]).needs_code()
