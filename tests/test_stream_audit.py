"""The stream audit (gpu_bench/timing/streams.py) on a fake GPU whose streams queue work behind a busy-wait: a
kernel that works on the stream it is given passes, one that writes its outputs from another stream (all of
them or one) is found, one whose call waits for the GPU leaves the audit inconclusive, and an inconclusive
audit flags the workload ``stream-unchecked``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.runner import SolutionRun, WorkloadRun
from evoteam.gpu_bench.schema import Definition, Environment, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.timing.statistics import TimingStats
from evoteam.gpu_bench.timing.streams import HOLD_MAX_MS, HOLD_MIN_MS, audit_streams
from evoteam.gpu_bench.worker.evaluate import WorkloadOutcome

pytestmark = pytest.mark.unit


class FakeStream:
    def __init__(self, name: str) -> None:
        self.name = name
        self.held = False
        self.queue: list[Callable[[], None]] = []

    def run(self, work: Callable[[], None]) -> None:
        """Work queued on this stream: it runs at once unless the stream is held."""
        if self.held:
            self.queue.append(work)
        else:
            work()

    def release(self) -> None:
        self.held = False
        for work in self.queue:
            work()
        self.queue.clear()


class FakeGpu:
    def __init__(self) -> None:
        self.given, self.observer = FakeStream("given"), FakeStream("observer")
        self.current = self.given  # the stream timing uses
        self.holds: list[float] = []

    def streams(self) -> tuple[FakeStream, FakeStream]:
        return self.current, self.observer

    def hold(self, ms: float) -> None:
        self.holds.append(ms)
        self.current.held = True

    def snapshot(self, tensors: Sequence[torch.Tensor], stream: FakeStream) -> list[torch.Tensor]:
        assert not stream.held
        return [t.clone() for t in tensors]

    def busy(self, stream: FakeStream) -> bool:
        return stream.held

    def synchronize(self) -> None:
        for stream in (self.given, self.observer):
            stream.release()


def buffers() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    inputs = {"x": torch.randn(64), "y": torch.randn(64)}
    return inputs, {"out": torch.zeros(64), "norm": torch.zeros(1)}


def poisoner(outputs: dict[str, torch.Tensor]) -> Callable[[], None]:
    return lambda: [t.fill_(float("nan")) for t in outputs.values()] and None


def kernel(
    gpu: FakeGpu, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor], how: str
) -> Callable[[], Callable[[], None]]:
    """A bind function: the binding takes the current stream when it binds (as the c and pycuda bindings do)."""

    def bind() -> Callable[[], None]:
        stream = gpu.current

        def write_out() -> None:
            outputs["out"].copy_(2 * inputs["x"] + inputs["y"])

        def write_norm() -> None:
            outputs["norm"].fill_(float(inputs["x"].abs().sum()))

        def call() -> None:
            if how == "honest":
                stream.run(write_out)
                stream.run(write_norm)
            elif how == "private":  # a stream of its own: nothing holds it
                write_out()
                write_norm()
            elif how == "partial":
                stream.run(write_out)
                write_norm()
            elif how == "waits":  # enqueues, then waits for the GPU (a synchronize in the binding)
                stream.run(write_out)
                stream.run(write_norm)
                gpu.synchronize()
            elif how == "same-bytes":  # writes on the given stream only, values equal to the poison
                stream.run(lambda: outputs["out"].fill_(float("nan")))

        return call

    return bind


@pytest.mark.parametrize(
    ("how", "verdict", "changed"),
    [
        ("honest", "on-stream", ""),
        ("same-bytes", "on-stream", ""),
        ("private", "elsewhere", "out, norm"),
        ("partial", "elsewhere", "norm"),
        ("waits", "inconclusive", ""),
    ],
)
def test_the_audit_finds_work_on_another_stream(how: str, verdict: str, changed: str) -> None:
    gpu = FakeGpu()
    inputs, outputs = buffers()
    slept: list[float] = []
    found = audit_streams(kernel(gpu, inputs, outputs, how), outputs, poisoner(outputs), 0.01, gpu, slept.append)
    assert found.verdict == verdict, found.detail
    if verdict == "elsewhere":
        assert found.detail.startswith(f"output(s) {changed} changed while the stream the kernel was given was held")
        assert "another stream" in found.detail and "torch.cuda.current_stream()" in found.detail
    if verdict == "inconclusive":
        assert "ran its 20 ms busy-wait out before its outputs were read" in found.detail
    assert gpu.holds == [HOLD_MIN_MS + 8 * 0.01]
    assert slept == [pytest.approx((2 * 0.01 + 5.0) / 1e3)]
    assert not gpu.given.held and not gpu.given.queue  # the GPU is left idle
    if how in ("honest", "private", "partial", "waits"):  # every kernel's answer is in place afterwards
        assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])


def test_the_hold_grows_with_the_kernel_and_is_capped() -> None:
    for median_ms, hold in ((1.0, HOLD_MIN_MS + 8.0), (10_000.0, HOLD_MAX_MS)):
        gpu = FakeGpu()
        inputs, outputs = buffers()
        slept: list[float] = []
        audit_streams(kernel(gpu, inputs, outputs, "honest"), outputs, poisoner(outputs), median_ms, gpu, slept.append)
        assert gpu.holds == [hold]
        assert slept == [pytest.approx(min(hold / 2, 2 * median_ms + 5.0) / 1e3)]


class _AuditedElsewhere:
    """A runner whose worker timed a CUDA kernel (as a GPU host does) and whose stream audit could not tell."""

    def __init__(self, unchecked: str | None) -> None:
        self.unchecked = unchecked

    def run(
        self, definition: Definition, workloads: list[Workload], solution: Solution, *args: object, **kw: object
    ) -> SolutionRun:
        passed = WorkloadOutcome(status=EvaluationStatus.PASSED, stream_unchecked=self.unchecked, timing=TimingStats(
            median_ms=1.0, p20_ms=1.0, p80_ms=1.0, n=10, noise=0.0, warmup_calls=3, clock="cuda_events"))  # fmt: skip
        return SolutionRun(
            solution=solution,
            build=BuildResult(ok=True, artifact="kernel.so"),
            environment=Environment(hardware="GPU: remote"),
            workloads=[WorkloadRun(workload=w, outcome=passed) for w in workloads],
        )

    def close(self) -> None:
        return None


@pytest.mark.parametrize("unchecked", [None, "the stream it was given ran its 20 ms busy-wait out"])
def test_an_inconclusive_audit_flags_the_workload_instead_of_passing_it_silently(
    definition: Definition, workloads: list[Workload], unchecked: str | None
) -> None:
    evaluator = Evaluator(_AuditedElsewhere(unchecked), paired=False)  # type: ignore[arg-type]
    candidate = kernel_solution("honest.cpp")
    result = evaluator.evaluate(definition, workloads[:2], candidate, candidate, quick_config())
    assert result.status == EvaluationStatus.PASSED
    for w in result.workloads:
        assert ("stream-unchecked" in w.flags) is (unchecked is not None), w.flags
