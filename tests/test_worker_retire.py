"""A solution that asked for isolation but runs in the worker's own process (a kernel on a GPU, which has no
host yet) retires the worker when its workloads are done, so nothing it left there reaches the next solution;
hosted solutions, and those run in the worker on purpose (``--no-isolate``), keep it warm
(``runner.run_solution``, ``bindings.load.runs_in_caller``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.bindings.load import runs_in_caller
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.runner import LocalRunner, run_solution
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    Environment,
    EvaluationStatus,
    Language,
    Solution,
    SourceFile,
    Workload,
)
from evoteam.gpu_bench.worker.evaluate import WorkloadOutcome
from evoteam.gpu_bench.worker.protocol import BuildRequest, Built, Evaluated, EvaluateRequest, Failed


class FakeWorker:
    """A worker handle that builds and passes everything, recording the calls it gets."""

    def __init__(self, build_ok: bool = True) -> None:
        self.calls: list[str] = []
        self.build_ok = build_ok
        self._id = 0

    @property
    def environment(self) -> Environment | None:
        return Environment(hardware="fake")

    def next_id(self) -> int:
        self._id += 1
        return self._id

    def build(self, request: BuildRequest, timeout_s: float) -> Built | Failed:
        self.calls.append("build")
        return Built(id=request.id, build=BuildResult(ok=self.build_ok, artifact="kernel.so", log="built"))

    def evaluate(self, request: EvaluateRequest, timeout_s: float) -> Evaluated | Failed:
        self.calls.append(f"evaluate {request.workload.uuid}")
        return Evaluated(id=request.id, outcome=WorkloadOutcome(status=EvaluationStatus.PASSED))

    def retire(self) -> None:
        self.calls.append("retire")


def on_gpu(language: Language, binding: Binding, entry: str) -> Solution:
    spec = BuildSpec(
        language=language,
        target_hardware=["sm_90a"],
        entry_point=f"kernel.{'py' if binding == Binding.PYTHON else 'cu'}::{entry}",
        binding=binding,
        destination_passing_style=True,
    )
    path = spec.entry_file
    return Solution(
        name="gpu", definition="scale_add_f32", author="tests", spec=spec, sources=[SourceFile(path=path, content="")]
    )


CUDA = on_gpu(Language.CUDA, Binding.C, "scale_add")
TRITON = on_gpu(Language.TRITON, Binding.PYTHON, "run")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("solution", "isolate", "retired"),
    [
        pytest.param(CUDA, True, True, id="a CUDA kernel"),
        pytest.param(TRITON, True, True, id="a Triton kernel"),
        pytest.param(kernel_solution("honest.cpp"), True, False, id="a C kernel in its native host"),
        pytest.param(kernel_solution("honest.py"), True, False, id="a Python kernel in its Python host"),
        pytest.param(CUDA, False, False, id="a CUDA kernel with --no-isolate"),
        pytest.param(kernel_solution("honest.cpp"), False, False, id="a C kernel with --no-isolate"),
    ],
)
def test_a_kernel_in_the_worker_s_process_retires_it_after_its_last_workload(
    definition: Definition, workloads: list[Workload], solution: Solution, isolate: bool, retired: bool
) -> None:
    assert runs_in_caller(solution, isolate) is (retired or not isolate)
    worker = FakeWorker()
    run = run_solution(worker, definition, workloads[:3], solution, quick_config(isolate=isolate), None)
    assert [w.outcome.status for w in run.workloads] == [EvaluationStatus.PASSED] * 3
    expected = ["build", *(f"evaluate {w.uuid}" for w in workloads[:3])]
    assert worker.calls == [*expected, "retire"] if retired else expected


@pytest.mark.unit
def test_a_gpu_kernel_that_fails_to_build_retires_the_worker_too(
    definition: Definition, workloads: list[Workload]
) -> None:
    """Its library's constructors may have run while it was loaded."""
    worker = FakeWorker(build_ok=False)
    run = run_solution(worker, definition, workloads[:3], CUDA, quick_config(), None)
    assert not run.build.ok and run.workloads == []
    assert worker.calls == ["build", "retire"]


@pytest.mark.integration
def test_a_retired_worker_is_replaced_at_the_next_request(
    definition: Definition, workloads: list[Workload], tmp_path: Path
) -> None:
    runner = LocalRunner(cache_root=tmp_path)
    config = quick_config(measure=False)
    try:
        first = runner.run(definition, workloads[:1], kernel_solution("honest.py"), config, None)
        assert first.workloads[0].outcome.status == EvaluationStatus.PASSED and runner.worker_starts == 1
        worker = runner._worker
        assert worker is not None and worker.alive
        worker.retire()
        assert not worker.alive
        again = runner.run(definition, workloads[:1], kernel_solution("honest.py"), config, None)
        assert again.workloads[0].outcome.status == EvaluationStatus.PASSED and runner.worker_starts == 2
    finally:
        runner.close()
