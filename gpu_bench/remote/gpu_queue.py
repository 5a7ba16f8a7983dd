"""The GPU queue: many agents submit jobs, a few slots (one runner each, one job at a time) run them.

Scheduling (priority, FIFO, profile jobs alone on their device, work-conserving) is ``scheduling.Scheduler``;
this module adds one thread per slot, futures and runner lifetimes. A job's own exception comes back as a
``JOB_ERROR`` result; any other exception is the slot's runner failing (``INFRA_ERROR``): it is reported,
the job is handed back with that status, and a slot that fails ``max_consecutive_errors`` times in a row is
retired. Imports nothing of evoteam outside ``gpu_bench``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from evoteam.gpu_bench.remote.scheduling import Outcome, Scheduler, SlotReport, Utilization
from evoteam.gpu_bench.runner import BenchInputError

R = TypeVar("R")
T = TypeVar("T")
R_contra = TypeVar("R_contra", contravariant=True)
T_co = TypeVar("T_co", covariant=True)

JobStatus = Outcome


class Job(Protocol[R_contra, T_co]):
    """What a job runs on the runner of the slot it gets."""

    @property
    def profile(self) -> bool: ...

    @property
    def priority(self) -> int: ...

    def run(self, runner: R_contra) -> T_co: ...


@dataclass(frozen=True)
class FnJob(Generic[R, T]):
    """A job from a function of the runner."""

    fn: Callable[[R], T]
    profile: bool = False
    priority: int = 0

    def run(self, runner: R) -> T:
        return self.fn(runner)


@dataclass(frozen=True)
class Factory(Generic[R]):
    """Builds a slot's runner on its first job, and again after the runner failed (the old one is closed)."""

    make: Callable[[], R]


class QueueClosed(RuntimeError):
    """``submit`` after ``close``."""


class SlotFailed(RuntimeError):
    """``unwrap`` of a job whose slot failed (infrastructure) or that was cancelled."""


@dataclass(frozen=True)
class JobResult(Generic[T]):
    status: Outcome
    value: T | None = None
    error: str = ""
    exception: BaseException | None = None
    slot: str | None = None
    wait_s: float = 0.0
    run_s: float = 0.0

    def unwrap(self) -> T:
        """The value; a job error re-raises the job's exception, anything else raises ``SlotFailed``."""
        if self.status is Outcome.DONE:
            return cast(T, self.value)
        if self.status is Outcome.JOB_ERROR and self.exception is not None:
            raise self.exception
        raise SlotFailed(f"{self.status.value} on {self.slot or 'no slot'}: {self.error}") from self.exception


def default_is_infra_error(exc: BaseException) -> bool:
    """Everything but bad input is the runner's failure."""
    return not isinstance(exc, BenchInputError)


@dataclass
class _Entry:
    job: Job[Any, Any]
    future: Future[JobResult[Any]]
    submitted: float


class GpuQueue(Generic[R]):
    """Thread-safe; ``devices[i]`` names slot i's physical GPU (default: a device per slot)."""

    def __init__(
        self,
        slots: Sequence[R | Factory[R]],
        devices: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_consecutive_errors: int = 3,
        is_infra_error: Callable[[BaseException], bool] = default_is_infra_error,
        on_slot_error: Callable[[SlotReport, BaseException], None] | None = None,
        close_runners: bool = True,
    ) -> None:
        devices = list(devices) if devices is not None else [f"gpu{i}" for i in range(len(slots))]
        self._sched = Scheduler(devices, names, max_consecutive_errors)
        self._specs = list(slots)
        self._runners: list[R | None] = [None if isinstance(s, Factory) else s for s in slots]
        self._clock = clock
        self._is_infra = is_infra_error
        self._on_slot_error = on_slot_error
        self._close_runners = close_runners
        self._cond = threading.Condition()
        self._entries: dict[int, _Entry] = {}
        self._assigned: dict[int, int] = {}
        self._next_ticket = 0
        self._closed = False
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), name=f"gpu-queue-{self._sched.slot_name(i)}", daemon=True)
            for i in range(len(slots))
        ]
        for t in self._threads:
            t.start()

    # -- agents ----------------------------------------------------------------------------------------
    def submit(self, job: Job[R, T]) -> Future[JobResult[T]]:
        future: Future[JobResult[T]] = Future()
        with self._cond:
            if self._closed:
                raise QueueClosed("the GPU queue is closed")
            ticket = self._next_ticket
            self._next_ticket += 1
            now = self._clock()
            self._entries[ticket] = _Entry(job, cast("Future[JobResult[Any]]", future), now)
            self._sched.add(ticket, now, job.profile, job.priority)
            self._dispatch()
        future.add_done_callback(lambda f: self._forget_cancelled(ticket, f))
        return future

    def evaluate(self, job: Job[R, T]) -> JobResult[T]:
        """Submits ``job`` and waits for its result."""
        return self.submit(job).result()

    def utilization(self) -> Utilization:
        with self._cond:
            return self._sched.utilization(self._clock())

    def slots(self) -> list[SlotReport]:
        with self._cond:
            return self._sched.reports()

    def close(self, drain: bool = True, timeout_s: float | None = None) -> None:
        """Stops taking jobs. ``drain``: waiting jobs still run (up to ``timeout_s``, then the rest are
        cancelled); else they are cancelled at once. Running jobs always finish; then the runners close."""
        with self._cond:
            self._closed = True
            if drain:
                self._cond.wait_for(lambda: self._sched.waiting == 0 and self._sched.active == 0, timeout_s)
            cancelled = self._pop(self._sched.take_all_waiting(self._clock()))
            self._cond.wait_for(lambda: self._sched.active == 0)
            self._stopping = True
            self._cond.notify_all()
        for entry in cancelled:
            _resolve(entry, JobResult(status=Outcome.CANCELLED, error="the GPU queue closed"))
        for t in self._threads:
            t.join()
        if self._close_runners:
            for i in range(len(self._runners)):
                self._drop_runner(i)

    def __enter__(self) -> GpuQueue[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- slots -----------------------------------------------------------------------------------------
    def _serve(self, slot: int) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: slot in self._assigned or self._stopping)
                if slot not in self._assigned:
                    return
                entry = self._entries.pop(self._assigned.pop(slot))
                if not entry.future.set_running_or_notify_cancel():
                    self._sched.finished(slot, self._clock(), Outcome.CANCELLED)
                    self._dispatch()
                    continue
                start = self._clock()
                self._sched.started(slot, start)
                wait_s = start - entry.submitted
            outcome, value, exc = self._run(slot, entry.job)
            end = self._clock()
            error = "" if exc is None else f"{type(exc).__name__}: {exc}"
            if outcome is Outcome.INFRA_ERROR and isinstance(self._specs[slot], Factory):
                self._drop_runner(slot)
            with self._cond:
                self._sched.finished(slot, end, outcome, error)
                report = self._sched.reports()[slot]
                lost = self._pop(self._sched.take_unrunnable(end))
                self._dispatch()
            name = self._sched.slot_name(slot)
            _resolve(entry, JobResult(outcome, value, error, exc, name, wait_s, end - start))
            for other in lost:
                _resolve(other, JobResult(status=Outcome.INFRA_ERROR, error="every GPU slot is retired"))
            if exc is not None and outcome is Outcome.INFRA_ERROR and self._on_slot_error is not None:
                self._on_slot_error(report, exc)

    def _run(self, slot: int, job: Job[R, Any]) -> tuple[Outcome, Any, BaseException | None]:
        try:
            runner = self._runners[slot]
            if runner is None:
                spec = self._specs[slot]
                assert isinstance(spec, Factory)
                runner = self._runners[slot] = spec.make()
            return Outcome.DONE, job.run(runner), None
        except BaseException as exc:  # a slot thread must hand every job back
            return (Outcome.INFRA_ERROR if self._is_infra(exc) else Outcome.JOB_ERROR), None, exc

    def _drop_runner(self, slot: int) -> None:
        runner, self._runners[slot] = self._runners[slot], None
        close = getattr(runner, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # closing a broken runner must not take the slot thread down
                close()

    # -- under the lock --------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        for slot, ticket in self._sched.dispatch(self._clock()):
            self._assigned[slot] = ticket
        self._cond.notify_all()

    def _pop(self, tickets: list[int]) -> list[_Entry]:
        return [self._entries.pop(t) for t in tickets]

    def _forget_cancelled(self, ticket: int, future: Future[Any]) -> None:
        """A job its agent cancelled while it waited leaves the queue (once assigned, its slot drops it)."""
        if not future.cancelled():
            return
        with self._cond:
            if self._sched.remove(ticket, self._clock()):
                self._entries.pop(ticket, None)
                self._cond.notify_all()


def _resolve(entry: _Entry, result: JobResult[Any]) -> None:
    if not entry.future.done():
        entry.future.set_result(result)
