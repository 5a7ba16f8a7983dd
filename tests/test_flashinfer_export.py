"""Export to FlashInfer-Bench's layout: what maps, what is converted (and still runs), what is refused,
and that flashinfer-bench's own data models load the result (skipped where flashinfer-bench is absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from conftest import DATA, kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.interop.flashinfer.export import (
    ExportError,
    check_exportable,
    export_flashinfer,
    to_flashinfer_solution,
)
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    DType,
    Environment,
    Evaluation,
    EvaluationStatus,
    GeneratedInput,
    Language,
    LaunchSpec,
    RandomInput,
    SafetensorsInput,
    Solution,
    SourceFile,
    Trace,
    Workload,
)
from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.verify.reference import reference_solution


def _fib_data() -> Any:
    return pytest.importorskip("flashinfer_bench.data", reason="flashinfer-bench is not installed")


def _evaluated(evaluator: Evaluator, definition: Definition, workloads: list[Workload], solution: Solution) -> Any:
    return evaluator.evaluate(definition, workloads, solution, reference_solution(definition), quick_config())


def _solution(language: Language, binding: Binding | None, path: str = "k.cu", **spec: Any) -> Solution:
    return Solution(
        name="s",
        definition="scale_add_f32",
        author="tests",
        spec=BuildSpec(
            language=language, target_hardware=["sm_90a"], entry_point=f"{path}::scale_add", binding=binding, **spec
        ),
        sources=[SourceFile(path=path, content="// kernel\n")],
    )


@pytest.mark.integration
def test_python_solution_and_traces_load_in_flashinfer_bench(
    evaluator: Evaluator, definition: Definition, workloads: list[Workload], tmp_path: Path
) -> None:
    fib = _fib_data()
    solution = kernel_solution("honest.py")
    result = _evaluated(evaluator, definition, workloads, solution)
    assert result.status == EvaluationStatus.PASSED
    written = export_flashinfer(solution, definition, result.traces, tmp_path)
    op = definition.op_type
    solution_file = tmp_path / "solutions" / op / definition.name / "honest.json"
    assert solution_file in written
    data = json.loads(solution_file.read_text())
    assert data["spec"]["language"] == "python"
    assert "binding" not in data["spec"] and "compile_flags" not in data["spec"]
    trace_set = fib.TraceSet.from_path(str(tmp_path))
    assert set(trace_set.definitions) == {definition.name}
    assert [s.name for s in trace_set.solutions[definition.name]] == ["honest"]
    assert len(trace_set.traces[definition.name]) == len(workloads)
    assert all(t.evaluation.status.value == "PASSED" for t in trace_set.traces[definition.name])
    assert {t.workload.uuid for t in trace_set.workloads[definition.name]} == {w.uuid for w in workloads}
    assert trace_set.get_solution("honest").spec.entry_point == "honest.py::run"


@pytest.mark.integration
def test_exporting_again_appends_traces_and_keeps_workloads_unique(
    evaluator: Evaluator, definition: Definition, workloads: list[Workload], tmp_path: Path
) -> None:
    solution = kernel_solution("honest.py")
    result = _evaluated(evaluator, definition, workloads, solution)
    export_flashinfer(solution, definition, result.traces, tmp_path)
    export_flashinfer(solution, definition, result.traces, tmp_path)
    op = definition.op_type
    traces = (tmp_path / "traces" / op / f"{definition.name}.jsonl").read_text().splitlines()
    lines = (tmp_path / "workloads" / op / f"{definition.name}.jsonl").read_text().splitlines()
    assert len(traces) == 2 * len(workloads)
    assert len(lines) == len(workloads)


@pytest.mark.integration
def test_c_solution_becomes_tvm_ffi_and_still_passes(
    evaluator: Evaluator, definition: Definition, workloads: list[Workload]
) -> None:
    pytest.importorskip("tvm_ffi")
    converted = to_flashinfer_solution(kernel_solution("honest.cpp"), definition)
    assert converted.spec.binding == Binding.TVM_FFI
    assert converted.spec.entry_point == "evoteam_tvm_ffi_scale_add.cpp::scale_add"
    assert [s.path for s in converted.sources] == ["honest.cpp", "evoteam_tvm_ffi_scale_add.cpp"]
    result = _evaluated(evaluator, definition, workloads, converted)
    assert result.status == EvaluationStatus.PASSED, result.build.log or [w.reason for w in result.workloads]


@pytest.mark.integration
def test_c_solution_with_a_scalar_input_converts_and_passes(evaluator: Evaluator) -> None:
    pytest.importorskip("tvm_ffi")
    from evoteam.gpu_bench.schema import ScalarInput

    definition = load_definition(DATA / "axpy.json")
    workloads = [Workload(uuid="a", axes={"n": 257}, inputs={"alpha": ScalarInput(value=-1.5)})]
    solution = kernel_solution("axpy.cpp", definition_name="axpy_f32", symbol="axpy")
    converted = to_flashinfer_solution(solution, definition)
    wrapper = converted.sources[-1].content
    assert 'extern "C" int axpy(double, const void*, const void*, void*, int64_t);' in wrapper
    assert "x.size(0)" in wrapper
    result = _evaluated(evaluator, definition, workloads, converted)
    assert result.status == EvaluationStatus.PASSED, result.build.log or [w.reason for w in result.workloads]


@pytest.mark.unit
def test_converted_c_solution_validates_as_a_flashinfer_bench_solution(definition: Definition) -> None:
    fib = _fib_data()
    converted = to_flashinfer_solution(kernel_solution("honest.cpp"), definition)
    loaded = fib.Solution.model_validate_json(converted.to_json())
    assert loaded.spec.binding.value == "tvm-ffi"
    assert loaded.get_entry_symbol() == "scale_add"


@pytest.mark.integration
def test_rejected_trace_becomes_runtime_error_with_the_reason_kept(
    evaluator: Evaluator, definition: Definition, workloads: list[Workload], tmp_path: Path
) -> None:
    fib = _fib_data()
    solution = kernel_solution("modifies_input.cpp")
    result = _evaluated(evaluator, definition, workloads[:1], solution)
    assert result.status == EvaluationStatus.REJECTED
    export_flashinfer(solution, definition, result.traces, tmp_path)
    (trace,) = fib.TraceSet.from_path(str(tmp_path)).traces[definition.name]
    assert trace.evaluation.status.value == "RUNTIME_ERROR"
    assert trace.evaluation.log.startswith("REJECTED by evoteam: ")
    assert "modified its input" in trace.evaluation.log
    assert trace.solution == "modifies_input"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("language", "binding", "kept"),
    [
        (Language.TRITON, Binding.PYTHON, None),
        (Language.CUDA, Binding.TVM_FFI, Binding.TVM_FFI),
        (Language.CUDA, Binding.TORCH, Binding.TORCH),
        (Language.CPP, None, Binding.TVM_FFI),
    ],
)
def test_bindings_that_map(definition: Definition, language: Language, binding: Binding, kept: Binding) -> None:
    path = "k.py" if language == Language.TRITON else "k.cu"
    converted = to_flashinfer_solution(_solution(language, binding, path), definition)
    assert converted.spec.binding == kept
    assert converted.spec.language == language
    assert [s.path for s in converted.sources] == [path]


@pytest.mark.unit
def test_cuda_c_and_pycuda_are_refused_with_a_reason(definition: Definition) -> None:
    with pytest.raises(ExportError, match="cuda, c binding"):
        to_flashinfer_solution(_solution(Language.CUDA, Binding.C), definition)
    launch = LaunchSpec(grid=["n"], block=["256"])
    with pytest.raises(ExportError, match="pycuda binding"):
        to_flashinfer_solution(_solution(Language.CUDA, Binding.PYCUDA, launch=launch), definition)


@pytest.mark.unit
def test_traces_of_another_solution_or_without_evaluation_are_refused(
    definition: Definition, workloads: list[Workload], tmp_path: Path
) -> None:
    solution = kernel_solution("honest.py")
    env = Environment(hardware="cpu")
    other = Trace(
        definition=definition.name,
        workload=workloads[0],
        solution="someone_else",
        evaluation=Evaluation(status=EvaluationStatus.RUNTIME_ERROR, environment=env, timestamp="t"),
    )
    with pytest.raises(ExportError, match="someone_else"):
        export_flashinfer(solution, definition, [other], tmp_path)
    bare = Trace(definition=definition.name, workload=workloads[0])
    with pytest.raises(ExportError, match="no evaluation"):
        export_flashinfer(solution, definition, [bare], tmp_path)


@pytest.mark.unit
def test_blobs_are_copied_from_the_blob_root(definition: Definition, tmp_path: Path) -> None:
    root = tmp_path / "src"
    blob = root / "blob" / "workloads" / "x.safetensors"
    blob.parent.mkdir(parents=True)
    save_file({"x": torch.ones(8), "y": torch.zeros(8)}, str(blob))
    rel = "blob/workloads/x.safetensors"
    workload = Workload(
        uuid="w",
        axes={"n": 8},
        inputs={"x": SafetensorsInput(path=rel, tensor_key="x"), "y": SafetensorsInput(path=rel, tensor_key="y")},
    )
    trace = Trace(
        definition=definition.name,
        workload=workload,
        solution="honest",
        evaluation=Evaluation(
            status=EvaluationStatus.RUNTIME_ERROR, environment=Environment(hardware="cpu"), timestamp="t"
        ),
    )
    out = tmp_path / "out"
    written = export_flashinfer(kernel_solution("honest.py"), definition, [trace], out, blob_root=root)
    assert out / rel in written
    assert (out / rel).read_bytes() == blob.read_bytes()
    with pytest.raises(ExportError, match="not under"):
        export_flashinfer(kernel_solution("honest.py"), definition, [trace], tmp_path / "o2", blob_root=tmp_path)


@pytest.mark.unit
def test_evoteam_only_dtypes_and_input_kinds_are_refused(definition: Definition, tmp_path: Path) -> None:
    solution = kernel_solution("honest.py")
    generated = Workload(uuid="g", axes={"n": 4}, inputs={"x": GeneratedInput(), "y": RandomInput()})
    trace = Trace(definition=definition.name, workload=generated, solution=solution.name, evaluation=None)
    with pytest.raises(ExportError, match=r"workload g makes inputs in ways only evoteam knows: x \(generated\)"):
        export_flashinfer(solution, definition, [trace], tmp_path)
    wide = definition.model_copy(
        update={"outputs": {"out": definition.outputs["out"].model_copy(update={"dtype": DType.FLOAT64})}}
    )
    with pytest.raises(ExportError, match=r"dtypes flashinfer-bench lacks: out \(float64\)"):
        check_exportable(wide, [])
    assert not any(tmp_path.iterdir())  # nothing written
