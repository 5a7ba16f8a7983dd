"""A definition whose reference writes into one of its inputs (FlashInfer Trace's gdn_mtp caches its
intermediate states in a buffer the caller passes): a candidate may write that input, what it writes is checked
like an output, and every other input must stay as it was."""

from __future__ import annotations

import pytest

from conftest import quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.schema import (
    AxisVar,
    Binding,
    BuildSpec,
    Definition,
    EvaluationStatus,
    Language,
    Solution,
    SourceFile,
    TensorSpec,
    Workload,
)
from evoteam.gpu_bench.verify.reference import reference_solution

pytestmark = pytest.mark.integration

DEFINITION = Definition(
    name="add_one_and_cache",
    op_type="elementwise",
    axes={"n": AxisVar(type="var")},
    inputs={"x": TensorSpec(shape=["n"], dtype="float32"), "cache": TensorSpec(shape=["n"], dtype="float32")},
    outputs={"out": TensorSpec(shape=["n"], dtype="float32")},
    reference="import torch\n\n\ndef run(x, cache):\n    cache.copy_(x * 2)\n    return x + 1\n",
)
WORKLOADS = [Workload(uuid=f"n{n}", axes={"n": n}, inputs={}) for n in (1000, 4096)]


def candidate(name: str, body: str) -> Solution:
    source = f"import torch\n\n\ndef run(x, cache, out):\n{body}"
    return Solution(
        name=name,
        definition=DEFINITION.name,
        author="tests",
        spec=BuildSpec(
            language=Language.PYTHON, target_hardware=["cpu"], entry_point="k.py::run", binding=Binding.PYTHON
        ),
        sources=[SourceFile(path="k.py", content=source)],
    )


def evaluate(evaluator: Evaluator, solution: Solution) -> tuple[EvaluationStatus, str]:
    result = evaluator.evaluate(DEFINITION, WORKLOADS, solution, reference_solution(DEFINITION), quick_config())
    return result.status, result.workloads[0].reason


def test_the_reference_itself_passes_as_a_candidate(evaluator: Evaluator) -> None:
    status, reason = evaluate(evaluator, reference_solution(DEFINITION))
    assert status == EvaluationStatus.PASSED, reason


def test_a_candidate_that_writes_the_input_as_the_reference_does_passes(evaluator: Evaluator) -> None:
    status, reason = evaluate(evaluator, candidate("good", "    cache.copy_(x * 2)\n    torch.add(x, 1, out=out)\n"))
    assert status == EvaluationStatus.PASSED, reason


def test_skipping_or_botching_the_write_fails_like_a_wrong_output(evaluator: Evaluator) -> None:
    status, reason = evaluate(evaluator, candidate("skips", "    torch.add(x, 1, out=out)\n"))
    assert status == EvaluationStatus.INCORRECT_NUMERICAL
    assert reason.startswith("the input the reference writes 'cache'"), reason
    status, reason = evaluate(evaluator, candidate("botches", "    cache.copy_(x * 3)\n    torch.add(x, 1, out=out)\n"))
    assert status == EvaluationStatus.INCORRECT_NUMERICAL and "'cache'" in reason


def test_writing_any_other_input_is_still_rejected(evaluator: Evaluator) -> None:
    body = "    cache.copy_(x * 2)\n    torch.add(x, 1, out=out)\n    x.mul_(0.5)\n"
    status, reason = evaluate(evaluator, candidate("writes_x", body))
    assert status == EvaluationStatus.REJECTED and "modified its input 'x'" in reason
