"""Every FlashInfer Trace definition and workload loads, validates and re-serializes losslessly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from conftest import SHARED_DATA
from evoteam.gpu_bench.schema import Definition, Evaluation, EvaluationStatus, Solution, Trace

DEFINITIONS = sorted((SHARED_DATA / "definitions").glob("*/*.json"))
WORKLOAD_FILES = sorted((SHARED_DATA / "workloads").glob("*/*.jsonl"))

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not DEFINITIONS, reason="the shared FlashInfer Trace data is not beside the repo"),
]


@pytest.mark.parametrize("path", DEFINITIONS, ids=lambda p: p.stem)
def test_definition_round_trips(path: Path) -> None:
    data = json.loads(path.read_text())
    model = Definition.model_validate(data)
    assert model.to_json_dict() == data
    assert json.loads(model.to_json()) == data


@pytest.mark.parametrize("path", WORKLOAD_FILES, ids=lambda p: p.stem)
def test_workload_traces_round_trip(path: Path) -> None:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        data = json.loads(line)
        trace = Trace.model_validate(data)
        assert trace.to_json_dict() == data
        assert trace.solution is None and trace.evaluation is None


def test_every_workload_matches_its_definition() -> None:
    definitions = {
        Definition.model_validate_json(p.read_text()).name: Definition.model_validate_json(p.read_text())
        for p in DEFINITIONS
    }
    checked = 0
    for path in WORKLOAD_FILES:
        for line in path.read_text().splitlines():
            trace = Trace.model_validate_json(line)
            d = definitions[trace.definition]
            d.axis_values(trace.workload.axes)  # raises on a missing or unknown axis
            assert set(trace.workload.inputs) <= set(d.inputs)
            checked += 1
    assert checked > 600


def _definition(**changes: object) -> dict[str, object]:
    data: dict[str, object] = json.loads(DEFINITIONS[0].read_text())
    data.update(changes)
    return data


def test_reference_without_run_is_rejected() -> None:
    with pytest.raises(ValidationError, match="top-level function named 'run'"):
        Definition.model_validate(_definition(reference="def forward(x):\n    return x\n"))


def test_shape_with_undefined_axis_is_rejected() -> None:
    data = _definition()
    first = next(iter(data["inputs"]))  # type: ignore[call-overload]
    data["inputs"][first]["shape"] = ["no_such_axis"]  # type: ignore[index]
    with pytest.raises(ValidationError, match="undefined axis 'no_such_axis'"):
        Definition.model_validate(data)


def test_unknown_fields_are_errors_not_silently_dropped() -> None:
    with pytest.raises(ValidationError, match="refrence"):
        Definition.model_validate(_definition(refrence="typo"))


def test_solution_entry_point_must_name_a_source() -> None:
    data = {
        "name": "s",
        "definition": "d",
        "author": "me",
        "spec": {"language": "cpp", "target_hardware": ["cpu"], "entry_point": "k.cpp::run", "binding": "c"},
        "sources": [{"path": "other.cpp", "content": ""}],
    }
    with pytest.raises(ValidationError, match=r"entry file 'k\.cpp'"):
        Solution.model_validate(data)
    data["sources"] = [{"path": "../k.cpp", "content": ""}]
    with pytest.raises(ValidationError, match="relative"):
        Solution.model_validate(data)


def test_status_decides_which_metrics_an_evaluation_carries() -> None:
    env = {"hardware": "CPU: test"}
    with pytest.raises(ValidationError, match="needs performance"):
        Evaluation.model_validate({"status": "PASSED", "environment": env, "timestamp": "t", "correctness": {}})
    with pytest.raises(ValidationError, match="excludes correctness"):
        Evaluation.model_validate({"status": "REJECTED", "environment": env, "timestamp": "t", "correctness": {}})
    ok = Evaluation.model_validate({"status": "TIMEOUT", "environment": env, "timestamp": "t"})
    assert ok.status == EvaluationStatus.TIMEOUT
