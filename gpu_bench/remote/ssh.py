"""``SshRunner``: the ``Runner`` that evaluates in one warm ``evoteam worker`` on a remote host over SSH.

Candidate sources travel inside the requests, so the host needs only evoteam installed (and a GPU, for CUDA).
Results have the same form as ``LocalRunner``'s: the same per-workload loop runs over the remote worker.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.gpu_bench.remote.ssh_host import SshHost, SshOptions
from evoteam.gpu_bench.remote.ssh_target import SshTarget
from evoteam.gpu_bench.remote.ssh_worker import SshWorker
from evoteam.gpu_bench.runner import Progress, SolutionRun, WorkerStartError, run_solution
from evoteam.gpu_bench.schema import Definition, Solution, Workload
from evoteam.gpu_bench.worker.client import WorkerLost
from evoteam.gpu_bench.worker.evaluate import EvalConfig

DEFAULT_REMOTE_COMMAND = ["evoteam", "worker"]
INSTALL_HINT = (
    "install evoteam there (`pip install evoteam`, or `pip install -e .` in a checkout of the repository), "
    "or name a remote command whose python has it"
)


class SshRunner:
    """Evaluates in a worker started on ``target`` (``ssh://user@host[:port]`` or ``user@host[:port]``).

    ``remote_command`` starts the worker there (default ``evoteam worker``; the worker's own options are
    appended). ``gpu=N`` gives it GPU N alone; ``memory_limit_mb`` applies on CPU only, as locally.
    ``remote_blob_root`` is the folder safetensors inputs are read from on the host (default: the path given
    to ``run``, for a shared file system). A dropped connection is reconnected and the request re-run up to
    ``reruns`` times; beyond that, or if the host cannot be reached at all, ``WorkerStartError``.
    """

    def __init__(
        self,
        target: str | SshTarget,
        remote_command: list[str] | None = None,
        *,
        known_hosts: str | Path | None = None,
        client_keys: list[str | Path] | None = None,
        agent_path: str | None = None,
        connect_timeout_s: float = 15.0,
        connect_attempts: int = 3,
        gpu: int | None = None,
        memory_limit_mb: int | None = None,
        remote_cache: str | None = None,
        remote_blob_root: str | None = None,
        reruns: int = 2,
    ) -> None:
        self.target = target if isinstance(target, SshTarget) else SshTarget.parse(target)
        options = SshOptions(
            known_hosts=str(known_hosts) if known_hosts is not None else None,
            client_keys=[str(k) for k in client_keys] if client_keys is not None else None,
            agent_path=agent_path,
            connect_timeout_s=connect_timeout_s,
            connect_attempts=connect_attempts,
        )
        self.remote_command = list(remote_command or DEFAULT_REMOTE_COMMAND)
        self._remote_blob_root = remote_blob_root
        self._host = SshHost(self.target, options)
        self._worker = SshWorker(self._host, self.remote_command, gpu, memory_limit_mb, remote_cache, reruns)

    @property
    def worker_starts(self) -> int:
        """Remote workers started so far (restarts after crashes, timeouts and reconnects included)."""
        return self._worker.starts

    @property
    def reconnects(self) -> int:
        return self._worker.reconnects

    def _ensure_worker(self) -> SshWorker:
        if not self._worker.alive:
            try:
                self._worker.start()
            except WorkerLost as lost:
                raise WorkerStartError(self._start_failure(lost)) from None
        return self._worker

    def _start_failure(self, lost: WorkerLost) -> str:
        said = self._worker.startup_errors()
        command = " ".join(self.remote_command)
        missing = "exited with code 127" in lost.reason or "No module named" in said or "not found" in said
        where = f"{self.target}: the worker (`{command}`) did not start: {lost.reason}"
        detail = "\n".join(part for part in (said[-2000:], lost.log_tail) if part)
        if missing:
            return f"{where}; evoteam is not installed there: {INSTALL_HINT}\n{detail}".rstrip()
        return f"{where}\n{detail}".rstrip()

    def run(
        self,
        definition: Definition,
        workloads: list[Workload],
        solution: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun:
        worker = self._ensure_worker()
        root = self._remote_blob_root or (str(blob_root) if blob_root else None)
        return run_solution(worker, definition, workloads, solution, config, root, progress)

    def close(self) -> None:
        """Stops the remote worker (and its process group), removes its folder there, closes the connection."""
        try:
            self._worker.close()
        finally:
            self._host.close()
