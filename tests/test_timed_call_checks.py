"""While a kernel is timed, its outputs are poisoned before every call and a random share of the calls (the
first always) is verified: a fake kernel in this process shows both, with the timing rules' exact call
order (verification trials, warm-up, timed calls, the final re-check)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import torch

from conftest import quick_config
from evoteam.gpu_bench.bindings import Call
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Workload
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.verify.inputs import Value
from evoteam.gpu_bench.worker.evaluate import EvalConfig, evaluate_workload, make_reference

pytestmark = pytest.mark.unit

TRIALS = 3  # quick_config's; one more trial reuses the buffers
WARM_CALLS = 3  # warm-up by time with warmup_s=0 makes exactly the minimum


class ScaleAdd:
    """A destination-passing ``out = 2 * x + y`` that records, per call, whether ``out`` held the poison, and
    writes zeros instead on the calls listed in ``wrong``."""

    destination_passing = True
    device = "cpu"

    def __init__(self, wrong: set[int] | None = None) -> None:
        self.calls = 0
        self.poisoned: list[bool] = []
        self.wrong = wrong or set()

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        x, y, out = inputs["x"], inputs["y"], outputs["out"]
        assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)

        def call() -> None:
            self.calls += 1
            self.poisoned.append(bool(torch.isnan(out).all()))
            if self.calls in self.wrong:
                out.zero_()
            else:
                torch.add(2 * x, y, out=out)

        return call


def config() -> EvalConfig:
    timing = TimingConfig(warmup_s=0.0, min_samples=8, max_samples=8, max_time_s=5.0, flush_cache=False)
    return quick_config(timing=timing)


def test_every_timed_call_finds_its_outputs_poisoned(definition: Definition, workloads: list[Workload]) -> None:
    kernel = ScaleAdd()
    outcome = evaluate_workload(kernel, definition, workloads[0], make_reference(definition), config(), None)
    assert outcome.status == EvaluationStatus.PASSED, outcome.reason
    first_timed = TRIALS + 1 + WARM_CALLS
    timed = kernel.poisoned[first_timed : first_timed + 8]
    assert len(timed) == 8 and all(timed)
    assert kernel.poisoned[-1]  # the final re-check too


def test_a_wrong_timed_call_is_caught(definition: Definition, workloads: list[Workload]) -> None:
    first_timed_call = TRIALS + 1 + WARM_CALLS + 1  # 1-based: the first timed call is always verified
    kernel = ScaleAdd(wrong={first_timed_call})
    outcome = evaluate_workload(kernel, definition, workloads[0], make_reference(definition), config(), None)
    assert outcome.status == EvaluationStatus.REJECTED
    assert "timed call 1:" in outcome.reason and "behaves differently when timed" in outcome.reason
