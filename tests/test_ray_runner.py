"""The Ray runner on a local two-CPU cluster: the same statuses and traces as a local run, in parallel, never hung."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (the ray extra: pip install -e .[ray])")

import ray

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.remote.ray_runner import NoFittingNode, RayHandle, RayJob, RayRunner, task_options
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.timing.gpu_lock import lock_folder
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = pytest.mark.e2e

S = EvaluationStatus


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        object_store_memory=80 * 1024 * 1024,
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nodes' build cache (written by each worker's build helper)."""
    return tmp_path_factory.mktemp("ray-build-cache")


@pytest.fixture(scope="module")
def ray_runner(cluster: None, ray_cache: Path) -> Iterator[RayRunner]:
    r = RayRunner(cache_root=str(ray_cache), memory_limit_mb=4096)
    try:
        yield r
    finally:
        r.close()


def gpu_solution(target: str = "sm_90a") -> Solution:
    honest = kernel_solution("honest.cpp")
    return honest.model_copy(update={"spec": honest.spec.model_copy(update={"target_hardware": [target]})})


def evaluate(runner: RayRunner | LocalRunner, definition: Definition, workloads: list[Workload], filename: str,
             config: EvalConfig) -> CandidateResult:  # fmt: skip
    baseline = reference_solution(definition)
    return Evaluator(runner).evaluate(definition, workloads, kernel_solution(filename), baseline, config)


def shape(result: CandidateResult) -> list[object]:
    """What must match between runners: statuses, and which fields each trace carries."""
    return [
        result.status,
        result.build.ok,
        [(w.uuid, w.status) for w in result.workloads],
        [sorted(t.model_dump(exclude_none=True)["evaluation"]) for t in result.traces],
    ]


@pytest.mark.parametrize(
    ("filename", "timeout_s", "statuses"),
    [
        ("honest.cpp", 20.0, [S.PASSED, S.PASSED, S.PASSED]),
        ("segfault_on_medium.cpp", 20.0, [S.PASSED, S.RUNTIME_ERROR, S.PASSED]),
        ("never_returns.cpp", 1.5, [S.TIMEOUT]),  # one workload: each timeout costs a worker restart
    ],
)
def test_statuses_and_traces_match_a_local_run(
    ray_runner: RayRunner,
    runner: LocalRunner,
    definition: Definition,
    workloads: list[Workload],
    filename: str,
    timeout_s: float,
    statuses: list[EvaluationStatus],
) -> None:
    config = quick_config(timeout_s=timeout_s, keep_going=True)
    workloads = workloads[: len(statuses)]
    remote = evaluate(ray_runner, definition, workloads, filename, config)
    local = evaluate(runner, definition, workloads, filename, config)
    assert [w.status for w in remote.workloads] == statuses, [w.reason for w in remote.workloads]
    assert shape(remote) == shape(local)
    assert [w.reason for w in remote.workloads if w.status != S.PASSED] == [
        w.reason for w in local.workloads if w.status != S.PASSED
    ]
    if filename == "honest.cpp":
        assert remote.summary.geomean_speedup is not None and remote.summary.geomean_speedup > 0


def test_progress_hears_every_workload_in_order(
    ray_runner: RayRunner, definition: Definition, workloads: list[Workload]
) -> None:
    heard: list[str] = []
    run = ray_runner.run(
        definition,
        workloads,
        kernel_solution("honest.cpp"),
        quick_config(),
        None,
        lambda w: heard.append(w.workload.uuid),
    )
    assert run.ok and heard == [w.uuid for w in workloads]


def test_two_candidates_run_in_parallel(
    ray_runner: RayRunner, definition: Definition, workloads: list[Workload]
) -> None:
    """Each candidate waits on its large workload until the other one is there too (tests/kernels/rendezvous.cpp):
    both pass only when they run at the same time; one after the other, the first would wait alone until its
    timeout. So neither a slow machine nor a fast one decides it, and a submit that waited for its evaluation
    would never let the second start."""
    large = [w for w in workloads if w.uuid == "large-65536"]
    # The rendezvous is a file each candidate makes: in process, because the native host holds files read-only,
    # and in the GPU lock folder, the one folder every (sandboxed) worker of the machine may make files in.
    lock_folder().mkdir(parents=True, exist_ok=True)
    meeting = Path(tempfile.mkdtemp(prefix="rendezvous-", dir=lock_folder()))
    solution = kernel_solution("rendezvous.cpp")
    flags = [*solution.spec.compile_flags, f'-DRENDEZVOUS="{meeting}"']
    solution = solution.model_copy(update={"spec": solution.spec.model_copy(update={"compile_flags": flags})})
    config = quick_config(timeout_s=120.0, isolate=False)  # only a hang comes near the timeout
    try:
        runs = ray_runner.gather([ray_runner.submit(definition, large, solution, config, None) for _ in "ab"])
        assert [[w.outcome.status for w in r.workloads] for r in runs] == [[S.PASSED], [S.PASSED]], [
            w.outcome.reason for r in runs for w in r.workloads
        ]
        assert len(list(meeting.iterdir())) == 2  # two processes met there
    finally:
        shutil.rmtree(meeting, ignore_errors=True)


def test_a_gpu_solution_asks_for_a_gpu_and_a_cpu_one_for_a_cpu() -> None:
    assert task_options(gpu_solution("sm_90a")) == {"num_gpus": 1}
    assert task_options(gpu_solution("NVIDIA_H100")) == {"num_gpus": 1}
    assert task_options(kernel_solution("honest.cpp")) == {"num_cpus": 1}


def test_a_gpu_solution_on_a_cluster_without_gpus_fails_at_once(
    ray_runner: RayRunner, definition: Definition, workloads: list[Workload]
) -> None:
    with pytest.raises(NoFittingNode, match=r"num_gpus=1, but the cluster has 0 GPU"):
        ray_runner.submit(definition, workloads, gpu_solution(), quick_config(), None)


def test_an_unschedulable_task_becomes_runtime_errors_within_its_budget(
    cluster: None, definition: Definition, workloads: list[Workload]
) -> None:
    """On an autoscaling cluster the GPU task waits (infeasible here) until its budget ends, then is cancelled."""
    tight = RayRunner(autoscaling=True, queue_timeout_s=0.5, build_timeout_s=0.5, startup_timeout_s=0.25)
    config = quick_config(timeout_s=0.5)
    started = time.monotonic()
    run = tight.run(definition, workloads[:1], gpu_solution(), config, None)
    assert time.monotonic() - started < 120.0  # its budget is 2 s; without one it would wait 600 s for a slot
    [only] = run.workloads
    assert only.outcome.status == S.RUNTIME_ERROR
    assert "did not finish within" in only.outcome.reason and "'num_gpus': 1" in only.outcome.reason
    tight.close()  # it did not start Ray, so the cluster stays up
    assert ray.is_initialized()


@ray.remote(max_retries=0)
def _dies() -> str:
    os._exit(3)


def test_a_task_whose_ray_worker_dies_becomes_runtime_errors(
    ray_runner: RayRunner, definition: Definition, workloads: list[Workload]
) -> None:
    job = RayJob(
        definition=definition, workloads=workloads, solution=kernel_solution("honest.cpp"), config=quick_config()
    )
    handle = RayHandle(ref=_dies.remote(), job=job, options={"num_cpus": 1}, submitted=time.monotonic(), budget_s=60.0)
    [run] = ray_runner.gather([handle])
    assert [w.outcome.status for w in run.workloads] == [S.RUNTIME_ERROR] * 3
    assert all("WorkerCrashedError" in w.outcome.reason for w in run.workloads), run.workloads[0].outcome.reason


def test_bad_input_on_the_node_is_raised_here(ray_runner: RayRunner, definition: Definition, tmp_path: Path) -> None:
    from evoteam.gpu_bench.runner import BenchInputError
    from evoteam.gpu_bench.schema import SafetensorsInput

    missing = Workload(
        uuid="missing-blob",
        axes={"n": 10},
        inputs={n: SafetensorsInput(path="nope.safetensors", tensor_key=n) for n in ("x", "y")},
    )
    with pytest.raises(BenchInputError):
        ray_runner.run(definition, [missing], kernel_solution("honest.cpp"), quick_config(), tmp_path)


def test_a_ray_worker_keeps_one_warm_runner_per_gpu_and_cache(tmp_path: Path) -> None:
    from evoteam.gpu_bench.remote import ray_runner as node

    cache = str(tmp_path)
    first = node._node_runner(cache, 1024, None)
    assert node._node_runner(cache, 1024, None) is first  # the next task finds it warm
    on_gpu = node._node_runner(cache, 1024, "3")  # Ray gave this worker a GPU: a new runner for GPU 3 alone
    assert on_gpu is not first and list(node._node_runners.values()) == [on_gpu]
    node._close_node_runners()
    assert node._node_runners == {}
