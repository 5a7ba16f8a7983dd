"""The adversarial suite's CUDA cases (``tests/kernels/adversarial/gpu_*.cu``) on a real GPU: work hidden on a
private stream, caching by pointer or by size, and less work once warmed up must each be rejected, and an
honest CUDA kernel evaluated after them must still pass (marker ``gpu``: skipped where torch sees no GPU).

Without a GPU they are built and linted by ``tests/test_adversarial_suite.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import KERNELS
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Binding, BuildSpec, Definition, Language, Solution, SourceFile, Workload
from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]

ARCH = "sm_90a"
GPU_TIMING = TimingConfig(warmup_s=0.01, min_samples=5, max_samples=50, max_time_s=0.2, flush_cache=True)


def cuda_solution(path_name: str) -> Solution:
    path = KERNELS / path_name
    spec = BuildSpec(
        language=Language.CUDA,
        target_hardware=[ARCH],
        entry_point=f"{path.name}::scale_add",
        binding=Binding.C,
        compile_flags=["-O2"],
    )
    return Solution(
        name=path.stem,
        definition="scale_add_f32",
        author="tests",
        spec=spec,
        sources=[SourceFile(path=path.name, content=path.read_text())],
    )


@pytest.fixture(scope="module")
def gpu_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunner]:
    runner = LocalRunner(cache_root=tmp_path_factory.mktemp("adversarial-gpu-cache"), gpu=0)
    try:
        yield runner
    finally:
        runner.close()


def evaluate(runner: LocalRunner, definition: Definition, workload: Workload, candidate: Solution) -> CandidateResult:
    config = EvalConfig(timeout_s=120.0, timing=GPU_TIMING)
    baseline = reference_solution(definition, target=ARCH)
    return Evaluator(runner).evaluate(definition, [workload], candidate, baseline, config)


@pytest.mark.parametrize(
    ("file", "phrase"),
    [
        ("gpu_private_stream.cu", "another stream"),
        ("gpu_pointer_cache.cu", "behaves differently when timed"),
        ("gpu_shape_cache.cu", "reuses the previous buffers"),
        ("gpu_less_after_warmup.cu", "behaves differently when timed"),
    ],
)
def test_a_gpu_cheat_is_rejected_and_an_honest_kernel_still_passes(
    gpu_runner: LocalRunner, definition: Definition, workloads: list[Workload], file: str, phrase: str
) -> None:
    large = next(w for w in workloads if w.uuid == "large-65536")
    result = evaluate(gpu_runner, definition, large, cuda_solution(f"adversarial/{file}"))
    assert result.status != S.PASSED, [w.flags for w in result.workloads]
    assert phrase in result.workloads[0].reason, result.workloads[0].reason
    honest = evaluate(gpu_runner, definition, large, cuda_solution("cuda/scale_add.cu"))
    assert honest.status == S.PASSED, honest.workloads[0].reason
