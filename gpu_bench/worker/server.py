"""``evoteam worker``: the process that builds, loads and runs candidates, answering requests on stdio.

It keeps built kernels and compiled references warm between requests. Before reading any request it moves
the protocol to private file descriptors and points fds 0/1/2 at /dev/null and the log file, so nothing a
kernel prints can corrupt the protocol, and every byte it prints lands in that request's log.

A worker that must not go on (a candidate patched torch, or a kernel's CUDA error left the GPU context
unusable) answers with ``worker_exiting`` and exits; its owner starts a fresh one for the next workload.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys
from pathlib import Path
from typing import IO

import torch
from pydantic import ValidationError

from evoteam.gpu_bench.bindings import Kernel, KernelLoadError
from evoteam.gpu_bench.bindings.host import (
    ProcessHost,  # loaded before candidates: integrity watches it
    empty_host_pids,
    follow_caller,
    on_one_cpu,
)
from evoteam.gpu_bench.bindings.load import load_kernel
from evoteam.gpu_bench.bindings.python_host import host_pids
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.environment import environment
from evoteam.gpu_bench.schema import EvaluationStatus, Solution
from evoteam.gpu_bench.verify import integrity
from evoteam.gpu_bench.verify.inputs import InputError
from evoteam.gpu_bench.verify.reference import is_reference
from evoteam.gpu_bench.worker import allocator, extension_dirs, process_state, strays
from evoteam.gpu_bench.worker import timed as _timed  # noqa: F401  (likewise)
from evoteam.gpu_bench.worker.build_helper import BuildHelper, BuildHelperLost
from evoteam.gpu_bench.worker.disk import describe_file_limit
from evoteam.gpu_bench.worker.evaluate import (
    DeviceFault,
    ReferenceFailure,
    RunReference,
    WorkloadOutcome,
    evaluate_workload,
    make_reference,
)
from evoteam.gpu_bench.worker.protocol import (
    REQUEST,
    BuildRequest,
    Built,
    Evaluated,
    EvaluateRequest,
    Failed,
    Ready,
    ShutdownRequest,
)
from evoteam.gpu_bench.worker.threads import ThreadPolicy, describe_wait
from evoteam.gpu_bench.worker.threads import apply as apply_threads
from evoteam.gpu_bench.worker.writes import shared_memory_entries, shared_memory_left


class _Worker:
    def __init__(self, out: IO[str], log_path: Path, builder: BuildHelper) -> None:
        self._out = out
        self._log_path = log_path
        self.builder = builder
        self._kernels: dict[tuple[str, bool], Kernel] = {}
        self._references: dict[str, RunReference] = {}
        self._threads = torch.get_num_threads()
        self._pristine = integrity.snapshot()
        self._tampered = integrity.tampered  # bound before any candidate is loaded: a patch cannot reach it
        self._modes = integrity.active_modes
        self._builds = extension_dirs.root_from_environment()  # read before any candidate could change it
        self.tainted = False

    def send(self, message: Ready | Built | Evaluated | Failed) -> None:
        self._out.write(message.model_dump_json() + "\n")
        self._out.flush()

    def point_builds(self, request: BuildRequest | EvaluateRequest) -> None:
        """Before the request (and before its process state is read): what the solution builds at run time
        goes to its own folders (``extension_dirs``)."""
        extension_dirs.use(self._builds, request.solution.content_hash())

    def handle(self, request: BuildRequest | EvaluateRequest) -> Built | Evaluated | Failed:
        if isinstance(request, BuildRequest):
            return self._build(request)
        return self._evaluate(request)

    def _build(self, request: BuildRequest) -> Built:
        key = (request.solution.content_hash(), request.isolate)
        try:
            result = self.builder.build(request.solution)
        except BuildHelperLost as lost:
            self.tainted = True
            reason = f"{lost}: the worker cannot build; it is replaced (a candidate it ran before may have ended it)"
            return Built(id=request.id, build=BuildResult(ok=False, log=reason), worker_exiting=True)
        load_error = None
        if result.ok and result.artifact is not None and key not in self._kernels:
            try:
                with extension_dirs.using(self._builds, request.solution.content_hash()):  # what it builds at import
                    self._kernels[key] = load_kernel(
                        request.solution, result.artifact, request.definition, request.isolate
                    )
            except KernelLoadError as exc:
                load_error = str(exc)
        return Built(id=request.id, build=result, load_error=load_error)

    def _loaded(self, request: EvaluateRequest, solution: Solution) -> Kernel | Failed:
        isolate = request.config.isolate
        kernel = self._kernels.get((solution.content_hash(), isolate))
        if kernel is None:
            built = self._build(
                BuildRequest(id=request.id, solution=solution, definition=request.definition, isolate=isolate)
            )
            if not built.build.ok or built.load_error:
                return Failed(id=request.id, error="load", message=built.load_error or built.build.log)
            kernel = self._kernels[(solution.content_hash(), isolate)]
        return kernel

    def release_hosts(self) -> list[str]:
        """Ends the native hosts of this request's kernels (the next request starts fresh ones), so nothing
        of a candidate outlives its request and no host counts as a stray, and every Python host whose
        kernel changed its process state; what their kernels changed of their hosts' process state
        (contained: it ends with them)."""
        changed: list[str] = []
        for kernel in self._kernels.values():
            if not isinstance(kernel, ProcessHost):
                continue
            if kernel.persistent:
                now = kernel.changed_state()
                if now:
                    kernel.release()
                    kernel.changed_state()  # read once more as it ended: the same changes, already counted
            else:
                kernel.release()
                now = kernel.changed_state()
            changed += [what for what in now if what not in changed]
        return changed

    def _evaluate(self, request: EvaluateRequest) -> Evaluated | Failed:
        kernel = self._loaded(request, request.solution)
        if isinstance(kernel, Failed):
            return kernel
        incumbent: Kernel | None = None
        if request.config.incumbent is not None:
            loaded = self._loaded(request, request.config.incumbent)
            if isinstance(loaded, Failed):  # the caller's trusted baseline: not the candidate's fault
                return Failed(id=request.id, error="input", message=f"the incumbent does not load: {loaded.message}")
            incumbent = loaded
        reference = self._reference(request)
        self._start_log()
        # Where every kernel runs in a host of its own, the worker's torch works on one thread: its pool's
        # threads spin for a while after each parallel operation (filling and checking buffers between calls),
        # and on a small machine they took the cores a host's own threads were waiting for (a 0.3 ms call of a
        # two-thread matmul took 3 ms). Set for the whole request: switching at the timing alone left the
        # pool spinning into it.
        hosted = all(isinstance(k, ProcessHost) for k in (kernel, incumbent) if k is not None)
        threads = 1 if hosted else self._threads
        if torch.get_num_threads() != threads:  # a candidate changed it: the reference deserves the same
            torch.set_num_threads(threads)
        try:
            outcome = evaluate_workload(
                kernel,
                request.definition,
                request.workload,
                reference,
                request.config,
                Path(request.blob_root) if request.blob_root else None,
                incumbent,
                trusted=is_reference(request.solution, request.definition),
            )
        except InputError as exc:
            return Failed(id=request.id, error="input", message=str(exc))
        except ReferenceFailure as exc:
            return Failed(id=request.id, error="reference", message=str(exc))
        except DeviceFault as fault:
            self.tainted = True
            return Evaluated(id=request.id, outcome=fault.outcome, log=self._log(), worker_exiting=True)
        finally:
            if threads != self._threads:  # the policy's count again, for what loads next (a host takes it)
                torch.set_num_threads(self._threads)
        log = self._log()
        replaced = self._tampered(self._pristine) + [f"torch mode {mode} (left active)" for mode in self._modes()]
        if replaced:
            self.tainted = True
            shown = ", ".join(replaced[:5]) + (f" and {len(replaced) - 5} more" if len(replaced) > 5 else "")
            reason = f"the candidate replaced {shown}, which the reference also uses"
            rejected = WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=reason)
            return Evaluated(id=request.id, outcome=rejected, log=log, worker_exiting=True)
        return Evaluated(id=request.id, outcome=outcome, log=log)

    def _reference(self, request: EvaluateRequest) -> RunReference:
        key = request.definition.model_dump_json()
        if key not in self._references:
            self._references[key] = make_reference(request.definition)
        return self._references[key]

    def _start_log(self) -> None:
        """Empties the log before a workload (writes append, so they land at the new end)."""
        _flush_all()
        os.truncate(self._log_path, 0)

    def _log(self, limit: int = 20_000) -> str:
        """The last ``limit`` bytes printed during this workload (a chatty kernel costs no memory)."""
        _flush_all()
        with self._log_path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - limit)
            f.seek(start)
            text = f.read().decode(errors="replace")
        return f"[... {start} bytes cut ...]\n{text}" if start else text


def _flush_all() -> None:
    """Python's and C's buffered output (a kernel's printf) into the log."""
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _noted(response: Built | Evaluated | Failed, note: str) -> Built | Evaluated | Failed:
    """``note`` in the log of an evaluation, which also says the worker will exit (it is replaced)."""
    if isinstance(response, Evaluated):
        text = f"{response.log}\n[evoteam: {note}; the worker was replaced]\n"
        return response.model_copy(update={"log": text, "worker_exiting": True})
    if isinstance(response, Built):
        return response.model_copy(update={"worker_exiting": True})
    return response


def _without_strays(response: Built | Evaluated | Failed, builder: int) -> Built | Evaluated | Failed:
    """Kills what the candidate left running before the answer goes out (not the ``builder`` helper), and
    says so in the log."""
    keep = [builder, *host_pids(), *empty_host_pids()]  # hosts that live on between requests
    killed = strays.kill_strays(keep=keep)
    if killed and isinstance(response, Evaluated):
        note = f"\n[evoteam: killed {killed} process(es) the candidate left running]\n"
        return response.model_copy(update={"log": response.log + note})
    return response


def serve(
    log_path: Path,
    builder: BuildHelper,
    memory_limit_mb: int | None,
    max_processes: int | None,
    threads: ThreadPolicy,
    writes: str = "not confined",
) -> int:
    """Serves requests until shutdown or end of input, building through ``builder``; the thread policy
    ``threads`` (whose environment the caller set before torch loaded) is applied first and recorded in the
    environment it reports, with ``writes``: what holds the worker's own writes (``writes.confine``)."""
    apply_threads(threads)
    hosts_follow = follow_caller(threads.threads == 1)
    sys.dont_write_bytecode = True  # build cache entries stay as built (a planted .pyc is caught on read)
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    if memory_limit_mb:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if max_processes:
        strays.limit_processes(max_processes)
    strays.become_subreaper()
    strays.exit_with_parent()
    process_state.forbid_inspection()
    kept = strays.keep_descendants()
    worker = _Worker(proto_out, log_path, builder)
    described = environment()
    described.libs["writes"] = writes
    described.libs["processes"] = kept
    described.libs["file_size"] = describe_file_limit()
    described.libs["threads"] = threads.describe()
    described.libs["hosts"] = "moved to the worker's CPU before each call" if hosts_follow else "on the worker's CPUs"
    described.libs["malloc"] = allocator.describe(os.environ)
    described.libs["omp_wait_policy"] = describe_wait(os.environ)
    worker.send(Ready(pid=os.getpid(), environment=described))
    for line in proto_in:
        if not line.strip():
            continue
        try:
            request = REQUEST.validate_json(line)
        except ValidationError as exc:
            worker.send(Failed(id=-1, error="protocol", message=f"invalid request: {exc.errors()[:3]}"))
            continue
        if isinstance(request, ShutdownRequest):
            return 0
        try:
            worker.point_builds(request)
            before = process_state.capture()
            shared_before = shared_memory_entries()
            with on_one_cpu():  # hosts take turns with the worker on its CPU
                handled = worker.handle(request)
                contained = worker.release_hosts()
            response = _without_strays(handled, builder.pid)
            if contained and isinstance(response, Evaluated):
                note = (
                    f"\n[evoteam: the kernel changed its host's process state ({'; '.join(contained)}); "
                    "contained: the host ended with the request, the worker and the next candidate are untouched]\n"
                )
                response = response.model_copy(update={"log": response.log + note})
            left = process_state.differences(before, process_state.capture())
            if left:  # the next candidate must not inherit it: this worker answers and is replaced
                worker.tainted = True
                response = _noted(response, f"the candidate left process state changed: {'; '.join(left)}")
            shared = shared_memory_left(shared_before)
            if shared:  # held until the sandbox ends, and the next candidate's to find full
                worker.tainted = True
                response = _noted(response, f"the candidate left {shared}")
            if not builder.alive:  # ended by what ran in this request: the next one would find no builder
                worker.tainted = True
                response = _noted(response, "the worker's build helper was ended during this request")
            worker.send(response)
            if worker.tainted:
                return 0
        except MemoryError:
            strays.kill_strays(keep=[builder.pid])
            reason = f"out of memory (the worker's limit is {memory_limit_mb} MB)"
            if isinstance(request, BuildRequest):
                worker.send(Failed(id=request.id, error="load", message=reason))
            else:
                outcome = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=reason)
                worker.send(Evaluated(id=request.id, outcome=outcome))
    return 0
