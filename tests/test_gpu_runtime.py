"""CUDA candidates on a real GPU (marker ``gpu``: skipped where torch sees none): the c and pycuda bindings,
a faulting kernel that costs only its own worker, and CUDA-event timing with the L2 flush and its checks."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from conftest import KERNELS
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    EvaluationStatus,
    Language,
    LaunchSpec,
    Solution,
    SourceFile,
    Workload,
)
from evoteam.gpu_bench.timing.gpu import TorchCudaDevice, flush_buffer_bytes, time_cuda_call
from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, device_key, gpu_lock
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.verify.inputs import make_inputs
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]

ARCH = "sm_90a"
CUDA_KERNELS = KERNELS / "cuda"
LAUNCH = LaunchSpec(grid=["ceil_div(n, 256)"], block=["256"])
GPU_TIMING = TimingConfig(warmup_s=0.01, min_samples=5, max_samples=50, max_time_s=0.2, flush_cache=True)
needs_pycuda = pytest.mark.skipif(importlib.util.find_spec("pycuda") is None, reason="pycuda is not installed")


def gpu_config(**changes: object) -> EvalConfig:
    return EvalConfig(timeout_s=120.0, timing=GPU_TIMING).model_copy(update=changes)


def gpu_solution(filename: str, binding: Binding) -> Solution:
    path = CUDA_KERNELS / filename if filename.endswith(".cu") else KERNELS / filename
    language = {Binding.C: Language.CUDA, Binding.PYCUDA: Language.CUDA, Binding.PYTHON: Language.PYTHON}[binding]
    spec = BuildSpec(
        language=language,
        target_hardware=[ARCH],
        entry_point=f"{path.name}::{'run' if binding == Binding.PYTHON else 'scale_add'}",
        binding=binding,
        compile_flags=["-O2"] if language == Language.CUDA else None,
        launch=LAUNCH if binding == Binding.PYCUDA else None,
    )
    return Solution(
        name=f"{path.stem}_{binding.value}",
        definition="scale_add_f32",
        author="tests",
        spec=spec,
        sources=[SourceFile(path=path.name, content=path.read_text())],
    )


@pytest.fixture(scope="module")
def gpu_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunner]:
    runner = LocalRunner(cache_root=tmp_path_factory.mktemp("gpu-build-cache"), memory_limit_mb=4096, gpu=0)
    try:
        yield runner
    finally:
        runner.close()


class GpuBench:
    def __init__(self, runner: LocalRunner, definition: Definition, workloads: list[Workload]) -> None:
        self.evaluator = Evaluator(runner)
        self.definition = definition
        self.workloads = workloads
        self.baseline = reference_solution(definition, target=ARCH)  # the reference, timed on the GPU too

    def __call__(self, solution: Solution, only: set[str] | None = None) -> CandidateResult:
        workloads = [w for w in self.workloads if only is None or w.uuid in only]
        return self.evaluator.evaluate(self.definition, workloads, solution, self.baseline, gpu_config())


@pytest.fixture(scope="module")
def gpu_bench(gpu_runner: LocalRunner, definition: Definition, workloads: list[Workload]) -> GpuBench:
    return GpuBench(gpu_runner, definition, workloads)


@pytest.mark.parametrize(
    ("filename", "binding"),
    [
        ("scale_add.cu", Binding.C),
        pytest.param("scale_add_kernel.cu", Binding.PYCUDA, marks=needs_pycuda),
        ("honest.py", Binding.PYTHON),
    ],
)
def test_honest_kernels_pass_on_the_gpu_with_event_timing(gpu_bench: GpuBench, filename: str, binding: Binding) -> None:
    result = gpu_bench(gpu_solution(filename, binding))
    assert result.status == EvaluationStatus.PASSED, [w.reason for w in result.workloads] + [result.load_error]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for w in result.workloads:
        timing = w.timing
        assert timing is not None and timing.clock == "cuda_events" and timing.n >= 5
        assert 0 < timing.p20_ms <= timing.median_ms <= timing.p80_ms
        assert timing.flush_bytes is not None and timing.flush_bytes >= 2 * l2
        assert timing.wall_per_call_ms is not None and timing.wall_per_call_ms > 0
        assert w.baseline_timing is not None and w.baseline_timing.clock == "cuda_events"  # reference on the GPU
        assert w.speedup is not None and w.speedup > 0


@pytest.mark.parametrize(
    ("filename", "binding"),
    [("oob_write.cu", Binding.C), pytest.param("oob_write_kernel.cu", Binding.PYCUDA, marks=needs_pycuda)],
)
def test_an_out_of_bounds_write_is_a_runtime_error_and_the_next_candidate_passes(
    gpu_bench: GpuBench, gpu_runner: LocalRunner, filename: str, binding: Binding
) -> None:
    gpu_bench(gpu_solution("scale_add.cu", Binding.C), only={"small-1000"})  # the worker and baseline are warm
    starts = gpu_runner.worker_starts
    faulty = gpu_bench(gpu_solution(filename, binding), only={"small-1000"})
    assert faulty.status == EvaluationStatus.RUNTIME_ERROR, [w.reason for w in faulty.workloads]
    reason = faulty.workloads[0].reason
    assert "illegal memory access" in reason and "worker was replaced" in reason
    after = gpu_bench(gpu_solution("scale_add.cu", Binding.C), only={"small-1000"})
    assert after.status == EvaluationStatus.PASSED, [w.reason for w in after.workloads]
    assert gpu_runner.worker_starts == starts + 1  # exactly the faulted worker was replaced


def test_work_hidden_on_another_stream_is_rejected(gpu_bench: GpuBench) -> None:
    result = gpu_bench(gpu_solution("other_stream.cu", Binding.C), only={"large-65536"})
    assert result.status == EvaluationStatus.REJECTED, [w.reason for w in result.workloads]
    assert "another stream" in result.workloads[0].reason


def test_the_l2_flush_makes_a_cache_resident_operand_cold() -> None:
    device = TorchCudaDevice(0)
    assert device.flush_bytes == flush_buffer_bytes(torch.cuda.get_device_properties(0).L2_cache_size)
    x = torch.randn(4 * 1024**2, device="cuda")  # 16 MiB, read-only: stays in L2 between calls unless flushed
    total = torch.empty((), device="cuda")

    def call() -> None:
        torch.sum(x, dim=0, out=total)

    config = GPU_TIMING.model_copy(update={"min_samples": 30, "max_samples": 200})
    warm = time_cuda_call(call, config.model_copy(update={"flush_cache": False}), device)
    cold = time_cuda_call(call, config, device)
    assert warm.clock == cold.clock == "cuda_events" and cold.flush_bytes == device.flush_bytes
    assert cold.median_ms > warm.median_ms, (cold.median_ms, warm.median_ms)
    assert torch.allclose(total, x.sum(), rtol=1e-4, atol=1e-2)


def test_the_events_time_the_gpu_s_work_not_a_slow_launch() -> None:
    """A tiny kernel behind 100 µs of host work per call (a slow binding's launch): the hold keeps the stream
    busy until the kernel is queued, so the events see microseconds and the launch is reported apart."""
    device = TorchCudaDevice(0)
    x = torch.zeros(1024, device="cuda")

    def call() -> None:
        deadline = time.perf_counter() + 100e-6
        while time.perf_counter() < deadline:
            pass
        x.add_(1.0)

    config = GPU_TIMING.model_copy(update={"min_samples": 30, "max_samples": 100, "flush_cache": False})
    stats = time_cuda_call(call, config, device)
    assert stats.launch_ms is not None and stats.launch_ms >= 0.1
    assert stats.median_ms < 0.03, (stats.median_ms, stats.launch_ms)  # an add on 4 KiB: a few µs


def test_the_gpu_lock_is_per_physical_device(tmp_path: Path) -> None:
    key = device_key(0)
    assert key.startswith(("uuid-", "gpu-"))
    with gpu_lock(key, tmp_path), pytest.raises(GpuLockTimeout), gpu_lock(key, tmp_path, wait_s=0.05):
        pass


def test_a_kernel_is_timed_interleaved_with_its_baseline_on_the_gpu(gpu_bench: GpuBench) -> None:
    result = gpu_bench(gpu_solution("scale_add.cu", Binding.C))
    assert result.status == EvaluationStatus.PASSED, [w.reason for w in result.workloads]
    for w in result.workloads:
        assert w.ci is not None and w.pairs is not None and w.speedup is not None
        assert w.ci[0] <= w.speedup <= w.ci[1]
        assert w.baseline_timing is not None and w.baseline_timing.n == w.pairs
    assert result.summary.geomean_ci is not None


def test_random_inputs_are_generated_on_the_gpu(definition: Definition, workloads: list[Workload]) -> None:
    first = make_inputs(definition, workloads[-1], 7, None, "cuda")
    again = make_inputs(definition, workloads[-1], 7, None, "cuda")
    tensors = {k: v for k, v in first.items() if isinstance(v, torch.Tensor)}
    assert tensors and all(t.is_cuda for t in tensors.values())
    assert all(torch.equal(t, again[k]) for k, t in tensors.items())  # type: ignore[arg-type]
