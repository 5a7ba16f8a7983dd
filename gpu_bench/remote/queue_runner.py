"""A ``Runner`` in front of a ``GpuQueue``: each agent's ``Evaluator`` submits through it and waits its turn.

A job error re-raises the job's exception (``BenchInputError`` stays bad input); a slot that failed or a
cancelled job raises ``WorkerStartError`` (infrastructure, not the candidate's fault).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evoteam.gpu_bench.remote.gpu_queue import GpuQueue, SlotFailed
from evoteam.gpu_bench.runner import Progress, Runner, SolutionRun, WorkerStartError
from evoteam.gpu_bench.schema import Definition, Solution, Workload
from evoteam.gpu_bench.worker.evaluate import EvalConfig


@dataclass(frozen=True)
class EvaluationJob:
    """One solution over workloads, run by the slot's runner."""

    definition: Definition
    workloads: list[Workload]
    solution: Solution
    config: EvalConfig
    blob_root: Path | None = None
    progress: Progress | None = None
    priority: int = 0

    @property
    def profile(self) -> bool:
        return False

    def run(self, runner: Runner) -> SolutionRun:
        return runner.run(self.definition, self.workloads, self.solution, self.config, self.blob_root, self.progress)


class QueueRunner:
    """Implements ``Runner`` by queueing; ``close`` leaves the shared queue open (its owner closes it)."""

    def __init__(self, queue: GpuQueue[Runner], priority: int = 0) -> None:
        self._queue = queue
        self._priority = priority

    def run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun:
        job = EvaluationJob(definition, workloads, solution, config, blob_root, progress, self._priority)
        try:
            return self._queue.evaluate(job).unwrap()
        except SlotFailed as failed:
            raise WorkerStartError(str(failed)) from failed

    def close(self) -> None:
        pass
