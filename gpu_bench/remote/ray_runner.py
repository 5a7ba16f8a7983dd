"""``RayRunner`` evaluates each solution as one Ray task; on its node a warm ``LocalRunner`` does the work.

The task takes one GPU (``num_gpus=1``) when the solution targets a GPU, else one CPU. Its ``LocalRunner`` is
cached in the Ray worker process, so consecutive tasks there find the evaluation worker (and its build cache)
warm. Results come back as the same ``SolutionRun`` JSON a local run produces, so statuses and traces are
identical in form. A task that dies (node lost, Ray worker crashed) or outlives its time budget becomes a
``RUNTIME_ERROR`` on each of its workloads, never a hang.

The nodes must be able to import ``evoteam`` (and torch, pydantic, a C++ compiler, nvcc for CUDA): on a local
cluster they are this machine. On a remote cluster install evoteam on every node's Python, or ship the package
with the job as a wheel (``pip wheel --no-deps -w dist .``), e.g. ``RayRunner("ray://head:10001",
runtime_env={"py_modules": ["dist/evoteam-0.1.0-py3-none-any.whl"]})``: the evaluation worker is started as
``python -m evoteam.gpu_bench.worker`` on the node, so the package must be importable by the node's
interpreter, which ``py_modules`` arranges through ``PYTHONPATH``. ``blob_root`` and
``cache_root`` are paths on the nodes (a shared file system for blobs). Imports nothing of roles, supervisor
or server.
"""

from __future__ import annotations

import atexit
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel

from evoteam.gpu_bench.build.builder import BUILD_TIMEOUT_S, BuildResult
from evoteam.gpu_bench.build.cuda.nvcc import resolve_arch
from evoteam.gpu_bench.runner import (
    BenchInputError,
    LocalRunner,
    Progress,
    SolutionRun,
    WorkerStartError,
    WorkloadRun,
    default_memory_limit_mb,
)
from evoteam.gpu_bench.schema import Definition, Environment, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.worker.client import STARTUP_TIMEOUT_S
from evoteam.gpu_bench.worker.evaluate import EvalConfig, WorkloadOutcome


class RayJob(BaseModel):
    """What one task needs on its node (all paths are the node's)."""

    definition: Definition
    workloads: list[Workload]
    solution: Solution
    config: EvalConfig
    blob_root: str | None = None
    cache_root: str | None = None
    memory_limit_mb: int | None = None
    """None: 75% of the node's memory (CPU only; a GPU worker runs without a limit)."""


class RayReply(BaseModel):
    """The task's answer: a run, or why the task itself could not evaluate (bad input, no worker)."""

    node: str
    run: SolutionRun | None = None
    input_error: str | None = None
    start_error: str | None = None


class NoFittingNode(WorkerStartError):
    """The cluster has none of the resources a task asks for (say, a GPU solution on a CPU-only cluster)."""


def task_options(solution: Solution) -> dict[str, Any]:
    """The Ray resources a solution's task asks for: one GPU if it targets a GPU, else one CPU."""
    if resolve_arch(solution.spec.target_hardware) is not None:
        return {"num_gpus": 1}
    return {"num_cpus": 1}


# --- on the node ---------------------------------------------------------------------------------------

_node_runners: dict[tuple[str | None, int | None, str | None], LocalRunner] = {}


def _node_runner(cache_root: str | None, memory_limit_mb: int | None, gpu: str | None) -> LocalRunner:
    """This Ray worker's warm runner; a different GPU (or cache) replaces it, so one evaluation worker lives here.

    ``gpu`` is the id Ray assigned (a physical index, or a UUID where the node names GPUs so; then the worker
    inherits Ray's ``CUDA_VISIBLE_DEVICES`` as it is). A GPU worker runs without an address-space limit."""
    key = (cache_root, memory_limit_mb, gpu)
    if key not in _node_runners:
        _close_node_runners()
        cache = Path(cache_root) if cache_root else None
        if gpu is None:
            limit = memory_limit_mb if memory_limit_mb is not None else default_memory_limit_mb()
            _node_runners[key] = LocalRunner(cache, limit)
        else:
            _node_runners[key] = LocalRunner(cache, None, gpu=int(gpu) if gpu.isdigit() else None)
    return _node_runners[key]


def _close_node_runners() -> None:
    while _node_runners:
        _node_runners.popitem()[1].close()


atexit.register(_close_node_runners)


def evaluate_here(job: RayJob, gpu: str | None) -> RayReply:
    """Runs ``job`` with this process's warm runner (the body of the Ray task, callable without Ray)."""
    node = socket.gethostname()
    runner = _node_runner(job.cache_root, job.memory_limit_mb, gpu)
    blob_root = Path(job.blob_root) if job.blob_root else None
    try:
        run = runner.run(job.definition, job.workloads, job.solution, job.config, blob_root)
    except BenchInputError as bad:
        return RayReply(node=node, input_error=str(bad))
    except WorkerStartError as broken:
        return RayReply(node=node, start_error=str(broken))
    return RayReply(node=node, run=run)


@ray.remote(max_retries=0)
def _evaluate_task(job_json: str) -> str:
    gpu_ids = ray.get_gpu_ids()
    gpu = str(gpu_ids[0]) if gpu_ids else None
    return evaluate_here(RayJob.model_validate_json(job_json), gpu).model_dump_json()


# --- on the caller -------------------------------------------------------------------------------------


@dataclass
class RayHandle:
    """One submitted task: gather it with ``RayRunner.gather``."""

    ref: Any
    job: RayJob
    options: dict[str, Any]
    submitted: float
    budget_s: float

    @property
    def deadline(self) -> float:
        return self.submitted + self.budget_s


def lost_run(job: RayJob, reason: str) -> SolutionRun:
    """A run whose task was lost: every workload is a RUNTIME_ERROR carrying ``reason`` (nothing was built)."""
    outcome = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=reason)
    return SolutionRun(
        solution=job.solution,
        build=BuildResult(ok=True, log=f"not evaluated: {reason}"),
        environment=Environment(hardware="unknown (the Ray task was lost)"),
        workloads=[WorkloadRun(workload=w, outcome=outcome) for w in job.workloads],
    )


class RayRunner:
    """Evaluates solutions as Ray tasks on a cluster; ``submit``/``gather`` run many candidates in parallel.

    ``address``: None or ``"local"`` starts (or joins) a cluster on this machine, ``"auto"`` joins the running
    one, ``"ray://HOST:PORT"`` connects through Ray Client; if Ray is already initialized it is used as is (and
    left running by ``close``). A task may wait ``queue_timeout_s`` for a free slot, then gets a budget of its
    build, every workload's timeout and a worker start per workload; past that it is cancelled and its
    workloads are ``RUNTIME_ERROR``. A GPU solution on a cluster without any GPU raises ``NoFittingNode``
    at once, unless ``autoscaling`` (a GPU node may still join), where the budget bounds the wait.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        cache_root: str | None = None,
        memory_limit_mb: int | None = None,
        runtime_env: dict[str, Any] | None = None,
        queue_timeout_s: float = 600.0,
        build_timeout_s: float = BUILD_TIMEOUT_S,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        autoscaling: bool = False,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._cache_root = cache_root
        self._memory_limit_mb = memory_limit_mb
        self._queue_timeout_s = queue_timeout_s
        self._build_timeout_s = build_timeout_s
        self._startup_timeout_s = startup_timeout_s
        self._autoscaling = autoscaling
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            target = None if address in (None, "local") else address
            kwargs = dict(init_kwargs or {})
            if runtime_env is not None:
                kwargs["runtime_env"] = runtime_env
            ray.init(address=target, **kwargs)

    def budget_s(self, job: RayJob) -> float:
        """How long the caller waits for a task before it counts as lost."""
        n = len(job.workloads)
        per_workload = job.config.timeout_s + self._startup_timeout_s
        return self._queue_timeout_s + self._startup_timeout_s + self._build_timeout_s + n * per_workload

    def submit(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
    ) -> RayHandle:
        job = RayJob(
            definition=definition,
            workloads=workloads,
            solution=solution,
            config=config,
            blob_root=str(blob_root) if blob_root else None,
            cache_root=self._cache_root,
            memory_limit_mb=self._memory_limit_mb,
        )
        options = task_options(solution)
        if "num_gpus" in options and not self._autoscaling:
            cluster: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
            gpus = cluster.get("GPU", 0.0)
            if gpus < options["num_gpus"]:
                raise NoFittingNode(
                    f"solution {solution.name!r} targets {solution.spec.target_hardware} and asks Ray for "
                    f"num_gpus={options['num_gpus']}, but the cluster has {gpus:g} GPU(s)"
                )
        ref = _evaluate_task.options(**options).remote(job.model_dump_json())
        return RayHandle(ref=ref, job=job, options=options, submitted=time.monotonic(), budget_s=self.budget_s(job))

    def gather(self, handles: list[RayHandle]) -> list[SolutionRun]:
        """Waits for every handle (each to its own deadline); the runs in the handles' order.

        Bad input or a worker that cannot start on a node raises after all handles are settled."""
        runs: dict[int, SolutionRun] = {}
        errors: list[Exception] = []
        pending = dict(enumerate(handles))
        while pending:
            now = time.monotonic()
            for i, handle in list(pending.items()):
                if handle.deadline <= now:
                    ray.cancel(handle.ref, force=True)
                    reason = (
                        f"the Ray task (resources {handle.options}) did not finish within {handle.budget_s:g} s "
                        "and was cancelled"
                    )
                    runs[i] = lost_run(handle.job, reason)
                    del pending[i]
            if not pending:
                break
            wait_s = max(0.0, min(h.deadline for h in pending.values()) - now)
            by_ref = {h.ref: i for i, h in pending.items()}
            ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=wait_s)
            for ref in ready:
                i = by_ref[ref]
                runs[i] = self._collect(pending.pop(i), errors)
        if errors:
            raise errors[0]
        return [runs[i] for i in range(len(handles))]

    def _collect(self, handle: RayHandle, errors: list[Exception]) -> SolutionRun:
        try:
            reply = RayReply.model_validate_json(ray.get(handle.ref))
        except ray.exceptions.RayError as failure:
            text = str(failure).strip()
            return lost_run(handle.job, f"the Ray task failed: {type(failure).__name__}: {text[-2000:]}")
        if reply.input_error is not None:
            errors.append(BenchInputError(reply.input_error))
        elif reply.start_error is not None:
            errors.append(WorkerStartError(f"on Ray node {reply.node}: {reply.start_error}"))
        return reply.run or lost_run(handle.job, f"node {reply.node} could not evaluate")

    def run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun:
        """One solution; ``progress`` hears each workload once the task has returned (not live)."""
        run = self.gather([self.submit(definition, workloads, solution, config, blob_root)])[0]
        if progress is not None:
            for done in run.workloads:
                progress(done)
        return run

    def close(self) -> None:
        """Shuts Ray down if this runner started it; the nodes' warm workers end with their Ray workers."""
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False
