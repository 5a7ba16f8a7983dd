"""The tvm-ffi binding end to end: build against the tvm-ffi headers, load, call on TensorViews (in a Python
host of its own), fail well."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

pytest.importorskip("tvm_ffi")

from conftest import DATA, kernel_solution
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.bindings.load import load_kernel
from evoteam.gpu_bench.bindings.python_host import TvmFfiHostKernel
from evoteam.gpu_bench.bindings.tvm_ffi import tvm_ffi_build_flags, tvm_ffi_link_flags
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Binding, Definition, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.task import KernelTask, find_task, load_definition
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rmsnorm"
EXPORT = "TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm);"
QUICK = EvalConfig(timing=TimingConfig(max_time_s=0.05, warmup_s=0.005, max_samples=20))

RAISING_KERNEL = """\
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight, tvm::ffi::TensorView output) {
  TVM_FFI_CHECK(hidden_states.size(0) < 0, ValueError)
      << "deliberate failure: batch_size " << hidden_states.size(0) << " is refused";
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm);
"""


@pytest.fixture(scope="module")
def task() -> KernelTask:
    return find_task("rmsnorm_tvmffi", EXAMPLE)


@pytest.fixture(scope="module")
def definition(task: KernelTask) -> Definition:
    return task.load_definition()


@pytest.fixture(scope="module")
def workloads(task: KernelTask) -> list[Workload]:
    return task.load_workloads()[:2]


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    """One warm worker (and one baseline measurement) for the whole file, with a build cache of its own."""
    runner = LocalRunner(cache_root=tmp_path_factory.mktemp("build-cache"))
    try:
        yield Evaluator(runner)
    finally:
        runner.close()


def _with_source(task: KernelTask, definition: Definition, content: str, name: str) -> Solution:
    solution = task.source_solution(definition)
    (source,) = solution.sources
    sources = [source.model_copy(update={"content": content})]
    return solution.model_copy(update={"name": name, "sources": sources})


def _evaluate(
    evaluator: Evaluator,
    task: KernelTask,
    definition: Definition,
    workloads: list[Workload],
    candidate: Solution,
) -> CandidateResult:
    baseline = task.baseline_solution(definition)
    return evaluator.evaluate(definition, workloads, candidate, baseline, QUICK, task.blob_root())


def test_example_task_passes(evaluator, task, definition, workloads):
    assert task.binding is not None and task.binding.value == "tvm-ffi"
    result = _evaluate(evaluator, task, definition, workloads, task.source_solution(definition))

    assert result.status == EvaluationStatus.PASSED, result.workloads
    assert result.build.ok and result.load_error is None
    assert [w.uuid for w in result.workloads] == [w.uuid for w in workloads]
    for w in result.workloads:
        assert w.status == EvaluationStatus.PASSED
        assert isinstance(w.speedup, float) and w.speedup > 0
        assert w.timing is not None and w.timing.median_ms > 0
    assert result.summary.passed == result.summary.total == 2
    assert all(t.evaluation is not None and t.evaluation.correctness is not None for t in result.traces)


def test_missing_export_is_a_load_error(evaluator, task, definition, workloads):
    source = task.source_solution(definition).sources[0].content
    assert EXPORT in source
    renamed = source.replace(EXPORT, "TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_v2, rmsnorm);")
    candidate = _with_source(task, definition, renamed, "renamed")
    result = _evaluate(evaluator, task, definition, workloads, candidate)

    assert result.status == EvaluationStatus.COMPILE_ERROR
    assert result.build.ok, result.build.log  # it compiled; loading is what failed
    assert result.load_error is not None
    assert "'rmsnorm'" in result.load_error and "not exported" in result.load_error
    assert all(w.status == EvaluationStatus.COMPILE_ERROR for w in result.workloads)
    assert all(w.speedup is None for w in result.workloads)


def test_tvm_ffi_check_is_a_runtime_error(evaluator, task, definition, workloads):
    candidate = _with_source(task, definition, RAISING_KERNEL, "raising")
    result = _evaluate(evaluator, task, definition, workloads[:1], candidate)

    assert result.status == EvaluationStatus.RUNTIME_ERROR
    assert result.build.ok and result.load_error is None
    (workload,) = result.workloads
    assert workload.status == EvaluationStatus.RUNTIME_ERROR
    batch = workloads[0].axes["batch_size"]
    assert f"deliberate failure: batch_size {batch} is refused" in workload.reason
    assert "ValueError" in workload.reason
    assert workload.speedup is None


PID_KERNEL = """\
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <unistd.h>

void scale_add(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView out) {
  const float* a = static_cast<const float*>(x.data_ptr());
  const float* b = static_cast<const float*>(y.data_ptr());
  float* o = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < out.size(0); ++i) o[i] = 2 * a[i] + b[i];
  o[0] = static_cast<float>(getpid());  // where it ran
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale_add, scale_add);
"""


def test_a_tvm_ffi_kernel_runs_in_a_python_host_not_in_its_caller(tmp_path: Path) -> None:
    """Loaded with ``isolate`` (as the worker loads CPU candidates), the module's export is called in a Python
    host of its own on the shared tensors: its native code never runs in the worker's process."""
    source, library = tmp_path / "pid.cpp", tmp_path / "pid.so"
    source.write_text(PID_KERNEL)
    command = ["g++", "-O2", "-shared", "-fPIC", *tvm_ffi_build_flags(), "-o", str(library), str(source)]
    subprocess.run([*command, *tvm_ffi_link_flags()], check=True, capture_output=True, timeout=300)
    solution = kernel_solution("honest.cpp")
    spec = solution.spec.model_copy(update={"binding": Binding.TVM_FFI, "entry_point": "pid.cpp::scale_add"})
    solution = solution.model_copy(update={"spec": spec})
    scale_add = load_definition(DATA / "scale_add.json")
    kernel = load_kernel(solution, str(library), scale_add, isolate=True)
    assert isinstance(kernel, TvmFfiHostKernel)
    x, y = torch.randn(1024), torch.randn(1024)
    out = torch.full((1024,), float("nan"))
    try:
        kernel.bind({"x": x, "y": y}, {"out": out}, {"n": 1024})()
        host_pid = kernel.pids()[0]
    finally:
        kernel.release()
    assert int(out[0]) == host_pid != os.getpid()
    assert torch.allclose(out[1:], 2 * x[1:] + y[1:])
    in_process = load_kernel(solution, str(library), scale_add, isolate=False)
    in_process.bind({"x": x, "y": y}, {"out": out}, {"n": 1024})()
    assert int(out[0]) == os.getpid()  # without isolate (--no-isolate), in the caller
