"""Workloads with fixed inputs (safetensors blobs): verified on perturbed copies, or flagged ``fixed-inputs``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import DATA, KERNELS, QUICK_TIMING, kernel_solution
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.schema import EvaluationStatus, Workload
from evoteam.gpu_bench.task import load_definition, load_workloads
from evoteam.gpu_bench.verify.inputs import PERTURBATION, perturbed
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

FIXED = KERNELS / "adversarial"


def fixed_workload() -> Workload:
    [workload] = load_workloads(FIXED / "fixed_scale_add.jsonl")
    return workload


@pytest.mark.unit
def test_a_perturbed_copy_changes_only_the_fixed_floating_point_values() -> None:
    workload = fixed_workload().model_copy(deep=True)
    x = torch.linspace(-3, 3, 256)
    inputs = {"x": x, "y": torch.arange(256, dtype=torch.int64)}  # an integer blob (indices) stays as it is
    copy = perturbed(workload, inputs, seed=7)
    assert copy is not None and copy["x"] is not x and torch.equal(inputs["x"], x)  # the original is untouched
    changed = copy["x"] != x
    assert changed.sum() > 200  # almost every value moved (zeros cannot)
    relative = ((copy["x"] - x).abs() / x.abs().clamp_min(1e-30))[x != 0]
    assert float(relative.max()) <= PERTURBATION * 1.0001
    assert torch.equal(copy["y"], inputs["y"])
    assert perturbed(workload, inputs, seed=7)["x"].equal(copy["x"])  # type: ignore[index,union-attr]


@pytest.mark.unit
def test_random_inputs_have_nothing_to_perturb() -> None:
    [workload] = load_workloads(DATA / "scale_add.jsonl")[:1]
    assert perturbed(workload, {"x": torch.ones(4), "y": torch.ones(4)}, seed=1) is None


TABLE_BY_SIZE = """#include <cstdint>
// Answers the fixed workload from a table keyed on its size alone: right on the fixed values only.
static float table[1 << 16];
static int64_t filled = -1;
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n == filled) { for (int64_t i = 0; i < n; ++i) out[i] = table[i]; return 0; }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  if (n <= (1 << 16)) { for (int64_t i = 0; i < n; ++i) table[i] = out[i]; filled = n; }
  return 0;
}
"""


@pytest.mark.integration
def test_answers_carried_for_fixed_values_fail_on_the_perturbed_copy(evaluator: Evaluator, tmp_path: Path) -> None:
    definition = load_definition(DATA / "scale_add.json")
    source = tmp_path / "table_by_size.cpp"
    source.write_text(TABLE_BY_SIZE)
    config = EvalConfig(timeout_s=20.0, timing=QUICK_TIMING)
    baseline = reference_solution(definition)
    result = evaluator.evaluate(definition, [fixed_workload()], kernel_solution(str(source)), baseline, config, FIXED)
    [w] = result.workloads
    assert w.status == EvaluationStatus.INCORRECT_NUMERICAL, w.reason
    assert "perturbed copy of the workload's fixed inputs" in w.reason


@pytest.mark.integration
def test_an_honest_kernel_verified_on_perturbed_copies_is_not_flagged(evaluator: Evaluator) -> None:
    definition = load_definition(DATA / "scale_add.json")
    config = EvalConfig(timeout_s=20.0, timing=QUICK_TIMING)
    baseline = reference_solution(definition)
    result = evaluator.evaluate(definition, [fixed_workload()], kernel_solution("honest.cpp"), baseline, config, FIXED)
    [w] = result.workloads
    assert w.status == EvaluationStatus.PASSED, w.reason
    assert "fixed-inputs" not in w.flags  # verified and memo-checked on perturbed copies
