"""Instruction classes of generated CUDA code (``build/cuda/instruction_classes.py``): what the compiler
emitted, read from PTX and SASS text with comments ignored; downgrades against the best's classes; which
constraint patterns a checker could ever tell apart."""

from __future__ import annotations

import pytest

from evoteam.gpu_bench.build.cuda.constraints import Constraints, check
from evoteam.gpu_bench.build.cuda.instruction_classes import (
    checkable,
    downgrades,
    instruction_classes,
    lost_classes,
)

pytestmark = pytest.mark.unit

WGMMA_PTX = """
.visible .entry tile_wgmma(
	.param .u64 tile_wgmma_param_0
)
{
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd3, {%r2, %r3}], [%r4];
	mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r4], %r5;
}
"""
WMMA_PTX = """
	// wgmma.mma_async.sync.aligned in a comment is not code
	/* cp.async.bulk.tensor here neither */
	wmma.load.a.sync.aligned.row.m16n16k16.global.bf16 {%r1, %r2, %r3, %r4}, [%rd1], %r5;
	wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 {%f1, %f2}, {%r1}, {%r2}, {%f3};
"""
AMPERE_PTX = """
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_group 0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%r6];
	@%p1 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r2}, {%r3}, {%f5};
"""
HOPPER_SASS = """
        Function : tile_HMMA_wgmma
        /*0090*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;   /* 0x000000... */
        /*00a0*/                   UTMALDG.2D [UR8], [UR4] ;
"""


def test_the_classes_are_what_the_compiler_emitted() -> None:
    assert instruction_classes(WGMMA_PTX) == ["wgmma", "TMA", "mbarrier"]
    assert instruction_classes(AMPERE_PTX) == ["mma.sync", "cp.async", "ldmatrix"]


def test_comments_and_names_are_not_code() -> None:
    """``wgmma.mma_async`` in a comment and ``wmma.mma`` are not ``wgmma``; ``wmma.mma.sync`` is WMMA, not raw
    ``mma.sync``; ``cp.async.commit_group`` is not a copy."""
    assert instruction_classes(WMMA_PTX) == ["wmma"]
    assert "cp.async" not in instruction_classes("\tcp.async.commit_group;\n\tcp.async.wait_group 0;\n")


def test_sass_counts_where_there_is_one() -> None:
    """Kernel names in function headers do not count; HGMMA and UTMALDG do."""
    assert instruction_classes("", HOPPER_SASS) == ["wgmma", "TMA"]
    assert instruction_classes(WMMA_PTX, "        /*0100*/   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;") == [
        "wmma",
        "mma.sync",
    ]


def test_a_lower_tensor_core_generation_is_a_downgrade() -> None:
    """The seeds' case: a team falls back from WGMMA to WMMA."""
    best, fallback = instruction_classes(WGMMA_PTX), instruction_classes(WMMA_PTX)
    assert downgrades(best, fallback) == ["wgmma → wmma", "TMA lost"]
    assert lost_classes(best, fallback) == ["wgmma", "TMA"]
    assert downgrades(best, [*best, "ldmatrix"]) == []  # more is not less
    assert downgrades(["mma.sync", "cp.async"], []) == ["mma.sync → no tensor-core instructions", "cp.async lost"]
    assert downgrades(["ldmatrix"], []) == []  # not a tensor-core MMA nor an asynchronous copy
    assert downgrades([], ["wgmma"]) == []


@pytest.mark.parametrize(
    "pattern", ["cuda::pipeline", "__pipeline_memcpy_async", "wmma::mma_sync", "cuda::memcpy_async(", "two words"]
)
def test_a_source_level_name_cannot_be_a_constraint(pattern: str) -> None:
    why = checkable(pattern)
    assert why is not None and "never appears in PTX or SASS" in why and "wgmma" in why


@pytest.mark.parametrize("pattern", ["wgmma", "TMA", "cp.async", "wgmma.mma_async", "HGMMA", "mma.sync.aligned"])
def test_classes_and_instructions_can_be_constraints(pattern: str) -> None:
    assert checkable(pattern) is None


def test_a_constraint_on_a_class_is_checked_by_its_instructions() -> None:
    """``require cp.async`` is not met by ``cp.async.commit_group``; ``forbid wmma`` is not broken by the
    word in a comment."""
    constraints = Constraints(require=["wgmma", "cp.async"], forbid=["wmma"])
    assert check(constraints, WGMMA_PTX + "\tcp.async.commit_group;\n// wmma\n", "", []) == [
        "required instruction 'cp.async' does not appear in the generated PTX/SASS"
    ]
    assert check(constraints, WMMA_PTX + AMPERE_PTX, "", []) == [
        "required instruction 'wgmma' does not appear in the generated PTX/SASS",
        "forbidden instruction 'wmma' appears in the generated PTX/SASS",
    ]
