"""Scalars by value, safetensors blobs, and the worker staying warm across candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from conftest import DATA, Bench, kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import EvaluationStatus, SafetensorsInput, ScalarInput, Workload
from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.verify.reference import reference_solution

pytestmark = pytest.mark.integration


def test_scalar_input_is_passed_by_value_to_the_c_abi(evaluator: Evaluator) -> None:
    definition = load_definition(DATA / "axpy.json")
    workloads = [
        Workload(uuid=f"alpha-{a}", axes={"n": 513}, inputs={"alpha": ScalarInput(value=a)}) for a in (0.5, -3.0)
    ]
    solution = kernel_solution("axpy.cpp", definition_name="axpy_f32", symbol="axpy")
    result = evaluator.evaluate(definition, workloads, solution, reference_solution(definition), quick_config())
    assert result.status == EvaluationStatus.PASSED, [w.reason for w in result.workloads]
    assert result.summary.total == 2


def test_safetensors_inputs_are_read_from_the_blob_root(evaluator: Evaluator, tmp_path: Path) -> None:
    definition = load_definition(DATA / "scale_add.json")
    blob = tmp_path / "blob" / "inputs.safetensors"
    blob.parent.mkdir()
    save_file({"x": torch.arange(300, dtype=torch.float32), "y": torch.ones(300)}, str(blob))
    workload = Workload(
        uuid="blob",
        axes={"n": 300},
        inputs={
            "x": SafetensorsInput(path="blob/inputs.safetensors", tensor_key="x"),
            "y": SafetensorsInput(path="blob/inputs.safetensors", tensor_key="y"),
        },
    )
    result = evaluator.evaluate(
        definition, [workload], kernel_solution("honest.cpp"), reference_solution(definition), quick_config(), tmp_path
    )
    assert result.status == EvaluationStatus.PASSED
    assert "fixed-inputs" not in result.workloads[0].flags  # verified on a perturbed copy as well
    # values a perturbation would push to infinity: the definition does not allow one, so the same values
    # every time are all there is, and the result is flagged
    save_file({"x": torch.full((300,), 1.69e38), "y": torch.zeros(300)}, str(tmp_path / "blob" / "huge.safetensors"))
    huge = workload.model_copy(
        update={
            "uuid": "huge",
            "inputs": {k: v.model_copy(update={"path": "blob/huge.safetensors"}) for k, v in workload.inputs.items()},
        }
    )
    flagged = evaluator.evaluate(
        definition, [huge], kernel_solution("honest.cpp"), reference_solution(definition), quick_config(), tmp_path
    )
    assert flagged.status == EvaluationStatus.PASSED and "fixed-inputs" in flagged.workloads[0].flags
    wrong = kernel_solution("partial_write.cpp")
    failed = evaluator.evaluate(definition, [workload], wrong, reference_solution(definition), quick_config(), tmp_path)
    assert failed.status == EvaluationStatus.INCORRECT_NUMERICAL


def test_one_warm_worker_serves_a_stream_of_candidates(bench: Bench, runner: LocalRunner) -> None:
    bench("honest.cpp")  # make sure the worker is up
    starts = runner.worker_starts
    for name in ("honest.py", "partial_write.cpp", "honest.cpp", "modifies_input.cpp"):
        bench(name, only={"small-1000"})
    assert runner.worker_starts == starts


def test_a_python_solution_is_importable_by_name_while_it_loads(bench: Bench) -> None:
    result = bench("uses_dataclass.py")  # dataclasses resolve annotations through sys.modules[the module]
    assert result.status == EvaluationStatus.PASSED, [w.reason for w in result.workloads] + [result.load_error]
