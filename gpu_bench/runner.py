"""Runners evaluate a solution over workloads in a worker; ``LocalRunner`` keeps one warm worker here.

A lost worker becomes a status on the workload it was running (``TIMEOUT`` or ``RUNTIME_ERROR``) and a new
worker takes the next one. Bad input (a missing blob, a reference that does not run) is a ``BenchInputError``.
``run_solution`` is that per-workload loop over any ``WorkerHandle``; the SSH runner shares it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from evoteam.gpu_bench.bindings.load import runs_in_caller
from evoteam.gpu_bench.build.builder import BUILD_TIMEOUT_S, BuildResult
from evoteam.gpu_bench.schema import Definition, Environment, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.worker.client import WorkerLost, WorkerProcess
from evoteam.gpu_bench.worker.disk import DiskLimits
from evoteam.gpu_bench.worker.evaluate import EvalConfig, WorkloadOutcome
from evoteam.gpu_bench.worker.protocol import BuildRequest, Built, Evaluated, EvaluateRequest, Failed
from evoteam.gpu_bench.worker.threads import ThreadPolicy


def default_memory_limit_mb(share: float = 0.75) -> int | None:
    """``share`` of this machine's memory: the worker's address-space limit on CPU (None if unknown)."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return int(pages * page_size * share) // (1024 * 1024)


class BenchInputError(ValueError):
    """The task itself is unusable: missing files or blobs, a reference that fails, an unloadable solution."""


class WorkerStartError(RuntimeError):
    """The worker process cannot start here (a broken install, not the candidate's fault)."""


class WorkloadRun(BaseModel):
    workload: Workload
    outcome: WorkloadOutcome
    log: str = ""


class SolutionRun(BaseModel):
    solution: Solution
    build: BuildResult
    load_error: str | None = None
    environment: Environment
    workloads: list[WorkloadRun]

    @property
    def ok(self) -> bool:
        return self.build.ok and self.load_error is None


Progress = Callable[[WorkloadRun], None]


class Runner(Protocol):
    def run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun: ...

    def close(self) -> None: ...


class WorkerHandle(Protocol):
    """What the per-workload loop needs of a worker (``WorkerProcess`` here, an SSH worker remotely).

    ``build`` and ``evaluate`` raise ``WorkerLost`` when the worker dies or misses its deadline.
    """

    @property
    def environment(self) -> Environment | None: ...

    def next_id(self) -> int: ...

    def build(self, request: BuildRequest, timeout_s: float) -> Built | Failed: ...

    def evaluate(self, request: EvaluateRequest, timeout_s: float) -> Evaluated | Failed: ...

    def retire(self) -> None:
        """Ends the worker now; the next request starts a fresh one."""
        ...


def run_solution(
    worker: WorkerHandle,
    definition: Definition,
    workloads: list[Workload],
    solution: Solution,
    config: EvalConfig,
    blob_root: str | None,
    progress: Progress | None = None,
) -> SolutionRun:
    """Builds ``solution`` in ``worker``, then evaluates it on each workload in turn (``blob_root`` as the
    worker sees it). A solution that asked for isolation but runs in the worker's own process (a kernel on a
    GPU, which has no host yet) retires the worker when it is done: whatever it left in that process (threads,
    patched code, CUDA context state such as limits, cache configuration or work still queued) cannot reach
    the next solution, which starts in a fresh one. Decided here, from the solution, not from anything the
    worker says."""
    try:
        request = BuildRequest(id=worker.next_id(), solution=solution, definition=definition, isolate=config.isolate)
        try:
            built = worker.build(request, BUILD_TIMEOUT_S)
        except WorkerLost as lost:
            built = Failed(id=request.id, error="load", message=f"{lost.reason}\n{lost.log_tail}")
        env = worker.environment or Environment(hardware="unknown")
        if isinstance(built, Failed):
            failed = BuildResult(ok=False, log=built.message)
            return SolutionRun(solution=solution, build=failed, environment=env, workloads=[])
        if not built.build.ok or built.load_error:
            return SolutionRun(
                solution=solution, build=built.build, load_error=built.load_error, environment=env, workloads=[]
            )
        runs: list[WorkloadRun] = []
        stopped: WorkloadRun | None = None
        for workload in workloads:
            run = _skipped(workload, stopped) if stopped is not None else None
            if run is None:
                run = _one(worker, definition, workload, solution, config, blob_root)
                if not config.keep_going and run.outcome.status in FAIL_FAST:
                    stopped = run
            runs.append(run)
            if progress is not None:
                progress(run)
        return SolutionRun(solution=solution, build=built.build, environment=env, workloads=runs)
    finally:
        if config.isolate and runs_in_caller(solution, isolate=True):
            worker.retire()


FAIL_FAST = (EvaluationStatus.TIMEOUT, EvaluationStatus.RUNTIME_ERROR)
"""After a workload ends with one of these (a hang, a crash, a kernel error), the rest are skipped unless
``EvalConfig.keep_going``."""


def _skipped(workload: Workload, cause: WorkloadRun) -> WorkloadRun:
    """A workload not run because an earlier one of the same candidate timed out or crashed: its status."""
    o = cause.outcome
    reason = (
        f"skipped: workload {cause.workload.uuid} ended {o.status.value} ({o.reason[:200]}); "
        "keep_going (evoteam bench --keep-going) evaluates every workload"
    )
    return WorkloadRun(workload=workload, outcome=WorkloadOutcome(status=o.status, reason=reason))


def _one(
    worker: WorkerHandle,
    definition: Definition,
    workload: Workload,
    solution: Solution,
    config: EvalConfig,
    blob_root: str | None,
) -> WorkloadRun:
    request = EvaluateRequest(
        id=worker.next_id(),
        definition=definition,
        workload=workload,
        solution=solution,
        config=config,
        blob_root=blob_root,
    )
    try:
        response = worker.evaluate(request, config.timeout_s)
    except WorkerLost as lost:
        status = EvaluationStatus.TIMEOUT if lost.timed_out else EvaluationStatus.RUNTIME_ERROR
        if lost.tampered:
            status = EvaluationStatus.REJECTED
        reason = (
            f"did not finish within {config.timeout_s:g} s; the worker was killed" if lost.timed_out else lost.reason
        )
        return WorkloadRun(workload=workload, outcome=WorkloadOutcome(status=status, reason=reason), log=lost.log_tail)
    if isinstance(response, Failed):
        if response.error in ("input", "reference"):
            raise BenchInputError(response.message)
        outcome = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=response.message)
        return WorkloadRun(workload=workload, outcome=outcome)
    return WorkloadRun(workload=workload, outcome=response.outcome, log=response.log)


class LocalRunner:
    """Evaluates in a worker subprocess on this machine.

    ``fresh=True`` starts a new worker with an empty build cache for every solution: the cost a harness
    without a warm worker pays (used by the benchmark for comparison). ``gpu=N`` gives the worker GPU N alone
    (``CUDA_VISIBLE_DEVICES=N``) and no address-space limit (``memory_limit_mb`` is ignored: CUDA reserves
    huge virtual memory); a CUDA fault replaces the worker like a crash does. ``threads`` is the worker's
    thread policy (default: every CPU this process may use, a thread each); results record it.
    ``disk_limits`` bounds what the worker's candidates write (``worker/disk.py``; default ``DiskLimits()``).
    """

    def __init__(
        self,
        cache_root: Path | None = None,
        memory_limit_mb: int | None = None,
        fresh: bool = False,
        gpu: int | None = None,
        threads: ThreadPolicy | None = None,
        disk_limits: DiskLimits | None = None,
    ):
        self._threads = threads
        self._disk_limits = disk_limits
        self._cache_root = cache_root
        self._memory_limit_mb = None if gpu is not None else memory_limit_mb
        self._gpu = gpu
        self._fresh = fresh
        self._worker: WorkerProcess | None = None
        self._scratch: Path | None = None
        self._retired_starts = 0

    def _ensure_worker(self) -> WorkerProcess:
        if self._worker is None:
            cache = self._cache_root
            if self._fresh:
                self._scratch = Path(tempfile.mkdtemp(prefix="evoteam-fresh-cache-"))
                cache = self._scratch
            self._worker = WorkerProcess(cache, self._memory_limit_mb, self._gpu, self._threads, self._disk_limits)
        if not self._worker.alive:
            try:
                self._worker.start()
            except WorkerLost as lost:
                raise WorkerStartError(f"the evaluation worker did not start: {lost.reason}\n{lost.log_tail}") from None
        return self._worker

    @property
    def worker_starts(self) -> int:
        """Worker processes started so far (restarts after crashes and timeouts included)."""
        return self._retired_starts + (self._worker.starts if self._worker else 0)

    def run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun:
        try:
            return self._run(definition, workloads, solution, config, blob_root, progress)
        finally:
            if self._fresh:
                self.close()

    def _run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None,
    ) -> SolutionRun:
        worker = self._ensure_worker()
        root = str(blob_root) if blob_root else None
        return run_solution(worker, definition, workloads, solution, config, root, progress)

    def close(self) -> None:
        if self._worker is not None:
            self._retired_starts += self._worker.starts
            self._worker.close()
            self._worker = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
