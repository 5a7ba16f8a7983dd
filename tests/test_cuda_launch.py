"""GPU plumbing that needs no GPU: launch expressions, kernel loading refusals, GPU timing and the GPU lock
with fakes, CUDA error classification, and how a GPU worker is started."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import DATA, kernel_solution
from evoteam.gpu_bench.bindings import KernelLoadError
from evoteam.gpu_bench.bindings.device import device_for, is_device_error
from evoteam.gpu_bench.bindings.load import load_kernel
from evoteam.gpu_bench.bindings.pycuda_kernel import argument_format
from evoteam.gpu_bench.build.cuda.launch import Launch, LaunchError, compile_expression
from evoteam.gpu_bench.schema import (
    AxisConst,
    AxisVar,
    Binding,
    BuildSpec,
    Definition,
    DType,
    EvaluationStatus,
    Language,
    LaunchSpec,
    Solution,
    SourceFile,
    TensorSpec,
)
from evoteam.gpu_bench.task import load_definition, load_workloads
from evoteam.gpu_bench.timing.gpu import (
    HOLD_MAX_MS,
    HOLD_MIN_MS,
    MIN_FLUSH_BYTES,
    TimingMismatch,
    cross_check,
    flush_buffer_bytes,
    time_cuda_call,
)
from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, gpu_lock, physical_key
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.worker import client, evaluate, server
from evoteam.gpu_bench.worker.build_helper import BuildHelper
from evoteam.gpu_bench.worker.client import WorkerProcess, worker_environment
from evoteam.gpu_bench.worker.evaluate import DeviceFault, EvalConfig, WorkloadOutcome
from evoteam.gpu_bench.worker.protocol import Evaluated, EvaluateRequest

AXES = ["n", "m"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "axes", "value"),
    [
        ("256", {}, 256),
        ("ceil_div(n, 256)", {"n": 1000}, 4),
        ("ceil_div(n, 256)", {"n": 1024}, 4),
        ("min(n, 1024)", {"n": 5000}, 1024),
        ("max(1, n // 2, m)", {"n": 1, "m": 0}, 1),
        ("(n + 255) // 256 * 2 % 7", {"n": 1000}, 1),
        ("-n + 2 * n - (m - 3)", {"n": 10, "m": 1}, 12),
        ("n % 3", {"n": 11}, 2),
    ],
)
def test_launch_expressions_evaluate_over_the_axes(text: str, axes: dict[str, int], value: int) -> None:
    assert compile_expression(text, AXES)(axes) == value


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("n / 2", "not allowed"),
        ("n ** 2", "not allowed"),
        ("1.5", "not allowed"),
        ("True", "not allowed"),
        ("'256'", "not allowed"),
        ("n.bit_length()", "not allowed"),
        ("__import__('os').system('true')", "not allowed"),
        ("__import__('os')", "only ceil_div, min and max"),
        ("[n][0]", "not allowed"),
        ("lambda: 1", "not allowed"),
        ("k * 2", "not an axis"),
        ("ceil_div(n)", "exactly two"),
        ("min(n)", "at least two"),
        ("ceil_div(a=n, b=2)", "not allowed"),
        ("n +", "not an expression"),
        ("n if m else 1", "not allowed"),
    ],
)
def test_launch_expressions_outside_the_whitelist_are_refused(text: str, phrase: str) -> None:
    with pytest.raises(LaunchError, match="launch expression") as info:
        compile_expression(text, AXES)
    assert phrase in str(info.value)


@pytest.mark.unit
def test_launch_geometry_is_padded_and_checked_per_workload() -> None:
    launch = Launch(LaunchSpec(grid=["ceil_div(n, 128)", "m"], block=["128"], shared_bytes="n * 4"), AXES)
    geometry = launch.resolve({"n": 1000, "m": 3})
    assert (geometry.grid, geometry.block, geometry.shared_bytes) == ((8, 3, 1), (128, 1, 1), 4000)
    with pytest.raises(LaunchError, match="grid dimension x is 0"):
        launch.resolve({"n": 0, "m": 3})
    with pytest.raises(LaunchError, match="divides by zero"):
        Launch(LaunchSpec(grid=["n // m"], block=["32"]), AXES).resolve({"n": 4, "m": 0})
    with pytest.raises(LaunchError, match="2048 threads"):
        Launch(LaunchSpec(grid=["1"], block=["64", "32"]), AXES).resolve({"n": 1, "m": 1})
    with pytest.raises(LaunchError, match="must not be negative"):
        Launch(LaunchSpec(grid=["1"], block=["32"], shared_bytes="-n"), AXES).resolve({"n": 1, "m": 1})


def _definition_with_scalars() -> Definition:
    return Definition(
        name="axpby",
        op_type="elementwise",
        axes={"n": AxisVar(), "k": AxisConst(value=4), "m": AxisVar()},
        inputs={
            "alpha": TensorSpec(shape=None, dtype=DType.FLOAT32),
            "x": TensorSpec(shape=["n"], dtype=DType.FLOAT16),
            "steps": TensorSpec(shape=None, dtype=DType.INT32),
        },
        outputs={"out": TensorSpec(shape=["n"], dtype=DType.FLOAT16)},
        reference="def run(alpha, x, steps):\n    return alpha * x\n",
    )


@pytest.mark.unit
def test_pycuda_arguments_follow_the_c_abi_order() -> None:
    # alpha (double), x (pointer), steps (int64), out (pointer), then var axes n and m (not the const k).
    assert argument_format(_definition_with_scalars()) == "dPqPqq"


def cuda_solution(binding: Binding, launch: LaunchSpec | None = None, language: Language = Language.CUDA) -> Solution:
    return Solution(
        name=f"scale_add_{binding.value}",
        definition="scale_add_f32",
        author="tests",
        spec=BuildSpec(
            language=language,
            target_hardware=["sm_90a"],
            entry_point="k.cu::scale_add",
            binding=binding,
            launch=launch,
        ),
        sources=[SourceFile(path="k.cu", content="// not built here")],
    )


@pytest.fixture
def definition_f32() -> Definition:
    return load_definition(DATA / "scale_add.json")


@pytest.fixture
def gpu_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretends torch sees a GPU, and makes sure pycuda cannot be imported (as on this machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)


@pytest.mark.unit
def test_without_pycuda_the_pycuda_binding_is_a_clear_load_error(definition_f32: Definition, gpu_visible: None) -> None:
    launch = LaunchSpec(grid=["ceil_div(n, 256)"], block=["256"])
    with pytest.raises(KernelLoadError, match=r"needs pycuda.*evoteam\[gpu\]"):
        load_kernel(cuda_solution(Binding.PYCUDA, launch), "kernel.cubin", definition_f32)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("launch", "phrase"),
    [
        (None, "needs spec.launch"),
        (LaunchSpec(grid=["n / 256"], block=["256"]), "not allowed"),
        (LaunchSpec(grid=["ceil_div(rows, 256)"], block=["256"]), "'rows', which is not an axis"),
    ],
)
def test_a_bad_launch_spec_is_refused_at_load(
    definition_f32: Definition, gpu_visible: None, launch: LaunchSpec | None, phrase: str
) -> None:
    with pytest.raises(KernelLoadError, match="launch") as info:
        load_kernel(cuda_solution(Binding.PYCUDA, launch), "kernel.cubin", definition_f32)
    assert phrase in str(info.value)


@pytest.mark.unit
def test_cuda_solutions_without_a_gpu_are_a_clear_load_error(
    definition_f32: Definition, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(KernelLoadError, match="sees no CUDA device"):
        load_kernel(cuda_solution(Binding.C), "kernel.so", definition_f32)
    python_on_gpu = cuda_solution(Binding.PYTHON, language=Language.TRITON)
    with pytest.raises(KernelLoadError, match="sees no CUDA device"):
        load_kernel(python_on_gpu, "folder", definition_f32)


@pytest.mark.unit
def test_bindings_that_do_not_fit_cuda_are_refused(definition_f32: Definition) -> None:
    with pytest.raises(KernelLoadError, match="c or pycuda binding"):
        load_kernel(cuda_solution(Binding.TVM_FFI), "kernel.so", definition_f32)
    with pytest.raises(KernelLoadError, match="loads a CUDA cubin"):
        load_kernel(cuda_solution(Binding.PYCUDA, language=Language.CPP), "kernel.so", definition_f32)


@pytest.mark.unit
def test_the_device_follows_the_target_hardware() -> None:
    assert device_for(["cpu"]) == "cpu" and device_for(["CPU", "cpu"]) == "cpu"
    assert device_for(["sm_90a"]) == "cuda" and device_for(["H100"]) == "cuda"


class _PycudaLaunchError(Exception):
    pass


_PycudaLaunchError.__module__ = "pycuda._driver"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("error", "is_cuda"),
    [
        (RuntimeError("CUDA error: an illegal memory access was encountered"), True),
        (_PycudaLaunchError("cuLaunchKernel failed: too many resources requested for launch"), True),
        (RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS"), True),
        (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), False),
        (ValueError("bad value"), False),
    ],
)
def test_cuda_errors_are_told_from_ordinary_failures(error: Exception, is_cuda: bool) -> None:
    assert is_device_error(error) is is_cuda


@pytest.mark.unit
def test_flush_buffer_is_twice_the_l2_rounded_to_a_mib() -> None:
    mib = 1024**2
    assert flush_buffer_bytes(50 * mib) == 100 * mib  # H100: 50 MiB of L2
    assert flush_buffer_bytes(60 * 1000**2) == 115 * mib  # 120 MB rounded up
    assert flush_buffer_bytes(0) == MIN_FLUSH_BYTES


class FakeGpu:
    """A serial model of one GPU: the current stream, a side stream, and a host clock (all in ms)."""

    flush_bytes = 8 * 1024**2

    def __init__(
        self, kernel_ms: float, host_ms: float = 0.005, on_current_stream: bool = True, flush_ms: float = 0.04
    ) -> None:
        self.kernel_ms, self.host_ms, self.on_current = kernel_ms, host_ms, on_current_stream
        self.flush_ms = flush_ms
        self.host = self.stream = self.side = 0.0
        self.log: list[str] = []
        self.holds: list[float] = []

    def clock(self) -> int:
        return int(self.host * 1e6)

    def kernel(self) -> None:
        self.log.append("call")
        self.host += self.host_ms
        if self.on_current:
            self.stream = max(self.stream, self.host) + self.kernel_ms
        else:
            self.side = max(self.side, self.host) + self.kernel_ms

    def synchronize(self) -> None:
        self.log.append("sync")
        self.host = max(self.host, self.stream, self.side)

    def record(self) -> FakeEvent:
        self.log.append("event")
        self.stream = max(self.stream, self.host)
        return FakeEvent(self.stream)

    def flush_l2(self) -> None:
        self.log.append("flush")
        self.stream = max(self.stream, self.host) + self.flush_ms

    def hold(self, ms: float) -> None:
        self.log.append("hold")
        self.holds.append(ms)
        self.stream = max(self.stream, self.host) + ms

    def sm_clock_mhz(self) -> int | None:
        return 1980


class FakeEvent:
    def __init__(self, at_ms: float) -> None:
        self.at_ms = at_ms

    def elapsed_ms(self, end: object) -> float:
        assert isinstance(end, FakeEvent)
        return end.at_ms - self.at_ms


GPU_TIMING = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=50, max_time_s=1.0)


@pytest.mark.unit
def test_gpu_timing_flushes_outside_the_events_and_reports_event_stats() -> None:
    gpu = FakeGpu(kernel_ms=0.25)
    rotations: list[int] = []

    def rotate(i: int) -> None:
        gpu.log.append(f"rotate{i}")
        rotations.append(i)

    stats = time_cuda_call(gpu.kernel, GPU_TIMING, gpu, rotate, clock=gpu.clock)
    assert stats.clock == "cuda_events" and stats.n == 10 and rotations == list(range(10))
    assert stats.median_ms == pytest.approx(0.25) and stats.noise == 0.0
    assert stats.flush_bytes == FakeGpu.flush_bytes and stats.sm_clock_mhz == 1980
    assert stats.warmup_calls == 3 and gpu.log[:6] == ["call", "sync"] * 3  # warm-up waits for each call
    first = gpu.log.index("rotate0")
    assert gpu.log[first : first + 7] == ["rotate0", "flush", "hold", "event", "call", "event", "sync"]
    assert stats.wall_per_call_ms is not None and stats.wall_per_call_ms == pytest.approx(0.25, rel=0.05)
    assert stats.launch_ms == pytest.approx(0.005)


@pytest.mark.unit
@pytest.mark.parametrize("flush", [True, False])
def test_the_events_see_the_gpu_s_work_not_the_host_s_launch(flush: bool) -> None:
    """A 5 µs kernel behind 40 µs of host launch (a Python binding; the H200 measured such a kernel at 38 µs
    against do_bench's 4.8): the hold keeps the stream busy until the call's work is queued."""
    gpu = FakeGpu(kernel_ms=0.005, host_ms=0.04, flush_ms=0.025)
    config = GPU_TIMING.model_copy(update={"flush_cache": flush})
    stats = time_cuda_call(gpu.kernel, config, gpu, clock=gpu.clock)
    assert stats.median_ms == pytest.approx(0.005)
    assert stats.launch_ms == pytest.approx(0.04)
    assert gpu.holds and all(h == pytest.approx(0.08, rel=1e-3) for h in gpu.holds)  # twice the slowest launch


@pytest.mark.unit
def test_without_the_hold_the_events_measured_the_launch() -> None:
    """What the hold fixes, on the same model: events around a call on an idle stream include its launch."""
    gpu = FakeGpu(kernel_ms=0.005, host_ms=0.04)
    start = gpu.record()
    gpu.kernel()
    end = gpu.record()
    assert start.elapsed_ms(end) == pytest.approx(0.045)


@pytest.mark.unit
def test_the_hold_is_bounded() -> None:
    slow = FakeGpu(kernel_ms=1.0, host_ms=9.0)  # a call that spends 9 ms on the host
    time_cuda_call(slow.kernel, GPU_TIMING.model_copy(update={"max_samples": 10}), slow, clock=slow.clock)
    assert max(slow.holds) == HOLD_MAX_MS
    fast = FakeGpu(kernel_ms=1.0, host_ms=0.0)
    time_cuda_call(fast.kernel, GPU_TIMING.model_copy(update={"max_samples": 10}), fast, clock=fast.clock)
    assert min(fast.holds) == HOLD_MIN_MS


@pytest.mark.unit
def test_gpu_timing_without_flush_writes_nothing() -> None:
    gpu = FakeGpu(kernel_ms=0.1)
    stats = time_cuda_call(gpu.kernel, GPU_TIMING.model_copy(update={"flush_cache": False}), gpu, clock=gpu.clock)
    assert "flush" not in gpu.log and stats.flush_bytes is None


@pytest.mark.unit
def test_work_on_another_stream_fails_the_wall_clock_cross_check() -> None:
    gpu = FakeGpu(kernel_ms=0.2, on_current_stream=False)
    with pytest.raises(TimingMismatch, match="another stream"):
        time_cuda_call(gpu.kernel, GPU_TIMING, gpu, clock=gpu.clock)


@pytest.mark.unit
def test_launch_bound_kernels_pass_the_cross_check() -> None:
    # A kernel far shorter than its host overhead: events and wall both measure the host, and agree.
    gpu = FakeGpu(kernel_ms=0.001, host_ms=0.02)
    wall = cross_check(gpu.kernel, gpu, median_ms=0.001, clock=gpu.clock)
    assert wall == pytest.approx(0.02, rel=0.05)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


@pytest.mark.unit
def test_gpu_lock_excludes_a_second_holder_until_released(tmp_path: Path) -> None:
    fake = FakeClock()
    with gpu_lock("gpu-0", tmp_path, clock=fake, sleep=fake.sleep):
        with pytest.raises(GpuLockTimeout, match="stayed locked"), gpu_lock("gpu-0", tmp_path, 0.5, fake, fake.sleep):
            pass
        assert fake.slept >= 0.49
        with gpu_lock("gpu-1", tmp_path, 0.0, fake, fake.sleep):  # another GPU is free
            pass
    with gpu_lock("gpu-0", tmp_path, 0.0, fake, fake.sleep):  # released: free again
        pass


@pytest.mark.integration
def test_gpu_lock_is_dropped_when_its_holder_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(tmp_path / "gpu-7.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(GpuLockTimeout), gpu_lock("gpu-7", tmp_path, wait_s=0.1):
            pass
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with gpu_lock("gpu-7", tmp_path, wait_s=0.0):  # free at once: one try takes it
        pass


@pytest.mark.unit
def test_the_lock_key_names_the_physical_gpu() -> None:
    assert physical_key(0, "GPU-1234-abcd", "3") == "uuid-GPU-1234-abcd"
    assert physical_key(0, None, "3") == "gpu-3"  # every worker calls its GPU 0; the key says which it is
    assert physical_key(1, None, "2, 5") == "gpu-5"
    assert physical_key(0, None, None) == "gpu-0"
    assert physical_key(0, None, "GPU-aa/bb") == "gpu-GPU-aa_bb"


class _Started(Exception):
    pass


def _capture_popen(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    seen: dict[str, object] = {}
    real_popen = client.subprocess.Popen

    def fake_popen(cmd: list[str], **kwargs: Any) -> object:
        if "env" not in kwargs:  # not the worker: the sandbox's probe (made once per process), say
            return real_popen(cmd, **kwargs)
        seen["cmd"], seen["env"] = cmd, kwargs["env"]
        raise _Started

    monkeypatch.setattr(client.subprocess, "Popen", fake_popen)
    return seen


@pytest.mark.integration
def test_a_gpu_worker_sees_one_gpu_and_has_no_address_space_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_popen(monkeypatch)
    worker = WorkerProcess(memory_limit_mb=4096, gpu=3)
    with pytest.raises(_Started):
        worker.start()
    assert "--memory-limit-mb" not in seen["cmd"]  # type: ignore[operator]
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "3"  # type: ignore[index]
    cpu_worker = WorkerProcess(memory_limit_mb=4096)
    with pytest.raises(_Started):
        cpu_worker.start()
    assert "--memory-limit-mb" in seen["cmd"]  # type: ignore[operator]
    worker.close()
    cpu_worker.close()


@pytest.mark.unit
def test_worker_environment_only_changes_the_visible_devices_the_heap_and_the_openmp_wait() -> None:
    base = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    heap = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
    added = {**heap, "OMP_WAIT_POLICY": "PASSIVE"}
    assert worker_environment(2, base) == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "2", **added}
    assert worker_environment(None, base) == {**base, **added}
    own = {"PATH": "/bin", "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_WAIT_POLICY": "active"}  # the user's choice
    assert worker_environment(None, own) == {**own, "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


class _GpuKernel:
    destination_passing = True
    device = "cuda"


@pytest.mark.unit
@pytest.mark.parametrize("healthy", [True, False])
def test_a_cuda_error_is_a_device_fault_and_an_ordinary_one_is_not(
    monkeypatch: pytest.MonkeyPatch, healthy: bool
) -> None:
    monkeypatch.setattr(evaluate, "cuda_healthy", lambda: healthy)
    kernel = _GpuKernel()
    with pytest.raises(DeviceFault, match=r"illegal memory access.*worker was replaced") as info:
        evaluate.failure(kernel, RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert info.value.outcome.status == EvaluationStatus.RUNTIME_ERROR
    if healthy:  # an exception that left the context usable costs no worker
        plain = evaluate.failure(kernel, ValueError("entry point returned 7"), "while timing: ")
        assert (
            plain.status == EvaluationStatus.RUNTIME_ERROR
            and plain.reason == "while timing: ValueError: entry point returned 7"
        )
    else:  # the same exception with the context broken behind it is a fault
        with pytest.raises(DeviceFault):
            evaluate.failure(kernel, ValueError("entry point returned 7"))
    kernel.device = "cpu"  # on the CPU nothing is a device fault, whatever the message says
    on_cpu = evaluate.failure(kernel, RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert on_cpu.status == EvaluationStatus.RUNTIME_ERROR and "replaced" not in on_cpu.reason


@pytest.mark.integration
def test_a_worker_whose_gpu_faulted_answers_and_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    definition = load_definition(DATA / "scale_add.json")
    workload = load_workloads(DATA / "scale_add.jsonl")[0]
    log = tmp_path / "worker.log"
    log.write_bytes(b"")
    builder = BuildHelper(tmp_path / "cache")
    worker = server._Worker(io.StringIO(), log, builder)
    fault = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason="CUDA error: an illegal memory access")

    def faulting(*args: object, **kwargs: object) -> WorkloadOutcome:
        raise DeviceFault(fault)

    monkeypatch.setattr(server, "evaluate_workload", faulting)
    request = EvaluateRequest(
        id=9, definition=definition, workload=workload, solution=kernel_solution("honest.cpp"), config=EvalConfig()
    )
    try:
        answer = worker.handle(request)
    finally:
        builder.close()
    assert isinstance(answer, Evaluated) and answer.worker_exiting and answer.outcome == fault
    assert worker.tainted  # serve() returns after sending this answer; the client starts a fresh worker
