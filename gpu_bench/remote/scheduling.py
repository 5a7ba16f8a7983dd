"""The GPU queue's pure scheduling core: which waiting job goes to which slot, and the time accounting.

No threads, no clock: every call is handed ``now``, so a simulation with a fake clock drives it exactly.
Slots belong to devices (several slots may share one physical GPU). Rules, applied on every ``dispatch``:

- waiting jobs are taken by priority (higher first), then FIFO;
- a normal job takes any free live slot whose device holds no profile job (preferring a device that is
  already busy, so whole devices stay free for profiles);
- a profile job takes a device alone: it needs every live slot of one device free, and while it runs no
  other job starts there. A profile job that cannot start reserves the device with the fewest busy slots,
  so later normal jobs do not starve it; with one slot per device a reservation never idles a free slot.

Imports nothing of evoteam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel


class Outcome(StrEnum):
    DONE = "done"
    JOB_ERROR = "job_error"
    """The job's own failure (bad input): the slot is fine."""
    INFRA_ERROR = "infra_error"
    """The slot's runner failed: counted against the slot."""
    CANCELLED = "cancelled"


class SlotReport(BaseModel):
    name: str
    device: str
    busy_s: float
    jobs: int
    errors: int
    """Infrastructure errors raised by this slot's runner."""
    retired: bool
    """Taken out of service after too many infrastructure errors in a row."""
    last_error: str = ""


class Utilization(BaseModel):
    slots: list[SlotReport]
    jobs: int
    """Jobs that ran (to a result or to an error)."""
    mean_wait_s: float
    max_wait_s: float
    makespan_s: float
    """From the first submission to the last finish."""
    lower_bound_s: float
    """Total run time over the number of slots: no schedule finishes sooner."""
    busy_fraction: float
    """Busy slot-seconds over slots × makespan."""
    waiting_s: float
    """Time during which at least one job was waiting to start."""
    while_waiting: float
    """While jobs waited: working slot-seconds over working + idle slot-seconds (1.0 ideal). Idle: assigned but
    not yet started, or free while a waiting job could start there (a reserved slot counts; a slot whose
    device a profile job holds counts as neither)."""


@dataclass
class _Waiting:
    ticket: int
    profile: bool
    priority: int
    seq: int
    since: float


@dataclass
class _Slot:
    name: str
    device: str
    job: _Waiting | None = None
    started: float | None = None
    retired: bool = False
    busy_s: float = 0.0
    jobs: int = 0
    errors: int = 0
    in_a_row: int = 0
    last_error: str = ""


@dataclass
class Scheduler:
    """Slots (named, each on a device) and the jobs waiting for them; tickets identify jobs."""

    devices: Sequence[str]
    names: Sequence[str] | None = None
    max_consecutive_errors: int = 3
    _slots: list[_Slot] = field(init=False)
    _waiting: list[_Waiting] = field(init=False, default_factory=list)
    _seq: int = field(init=False, default=0)
    _last: float | None = field(init=False, default=None)
    _first_submit: float | None = field(init=False, default=None)
    _last_finish: float | None = field(init=False, default=None)
    _waits: list[float] = field(init=False, default_factory=list)
    _waiting_s: float = field(init=False, default=0.0)
    _work_s: float = field(init=False, default=0.0)
    _idle_s: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        names = list(self.names) if self.names is not None else [f"slot{i}" for i in range(len(self.devices))]
        if len(names) != len(self.devices) or not names:
            raise ValueError("one name per slot, and at least one slot")
        self._slots = [_Slot(n, d) for n, d in zip(names, self.devices, strict=True)]

    # -- jobs in ---------------------------------------------------------------------------------------
    def add(self, ticket: int, now: float, profile: bool = False, priority: int = 0) -> None:
        self._advance(now)
        self._seq += 1
        self._waiting.append(_Waiting(ticket, profile, priority, self._seq, now))
        if self._first_submit is None:
            self._first_submit = now

    def remove(self, ticket: int, now: float) -> bool:
        """Drops a waiting (not yet assigned) job; False if it is not waiting."""
        self._advance(now)
        before = len(self._waiting)
        self._waiting = [w for w in self._waiting if w.ticket != ticket]
        return len(self._waiting) < before

    def take_all_waiting(self, now: float) -> list[int]:
        """Removes every waiting job (for cancelling); assigned and running jobs stay."""
        self._advance(now)
        tickets = [w.ticket for w in self._ordered()]
        self._waiting = []
        return tickets

    def take_unrunnable(self, now: float) -> list[int]:
        """Removes and returns the waiting jobs no live slot can ever run (every slot retired)."""
        if any(not s.retired for s in self._slots):
            return []
        return self.take_all_waiting(now)

    # -- dispatch --------------------------------------------------------------------------------------
    def dispatch(self, now: float) -> list[tuple[int, int]]:
        """Assigns every waiting job that can start now; returns (slot index, ticket) pairs."""
        self._advance(now)
        out: list[tuple[int, int]] = []
        reserved: set[str] = set()
        for job in self._ordered():
            slot = self._place(job, reserved)
            if slot is None:
                continue
            self._waiting.remove(job)
            self._slots[slot].job = job
            out.append((slot, job.ticket))
        return out

    def _place(self, job: _Waiting, reserved: set[str]) -> int | None:
        devices = [d for d in dict.fromkeys(s.device for s in self._slots) if d not in reserved and self._live(d)]
        if job.profile:
            for d in devices:
                if all(s.job is None for s in self._on(d)):
                    return next(i for i, s in enumerate(self._slots) if s.device == d and not s.retired)
            if devices:
                reserved.add(min(devices, key=lambda d: sum(s.job is not None for s in self._on(d))))
            return None
        free = [
            i for i, s in enumerate(self._slots) if s.job is None and s.device in devices and not self._held(s.device)
        ]
        if not free:
            return None
        return max(free, key=lambda i: (self._busy_on(self._slots[i].device), -i))

    def idle_runnable(self) -> list[int]:
        """Free live slots that could start some waiting job now, reservations ignored ([] after dispatch
        whenever each device has one slot: the queue is work-conserving)."""
        out = []
        for i, s in enumerate(self._slots):
            if s.retired or s.job is not None or self._held(s.device):
                continue
            whole = all(o.job is None for o in self._on(s.device))
            if any(not w.profile or whole for w in self._waiting):
                out.append(i)
        return out

    # -- slots report back -----------------------------------------------------------------------------
    def started(self, slot: int, now: float) -> None:
        self._advance(now)
        s = self._slots[slot]
        if s.job is None:
            raise RuntimeError(f"slot {s.name} started without a job")
        s.started = now
        self._waits.append(now - s.job.since)

    def finished(self, slot: int, now: float, outcome: Outcome, error: str = "") -> bool:
        """Frees ``slot``; returns True when this finish retired it (too many infrastructure errors)."""
        self._advance(now)
        s = self._slots[slot]
        if s.started is not None:
            s.busy_s += now - s.started
            s.jobs += 1
            self._last_finish = now
        s.job, s.started = None, None
        if outcome is not Outcome.INFRA_ERROR:
            if outcome is not Outcome.CANCELLED:
                s.in_a_row = 0
            return False
        s.errors += 1
        s.in_a_row += 1
        s.last_error = error
        if not s.retired and s.in_a_row >= self.max_consecutive_errors:
            s.retired = True
            return True
        return False

    # -- state and accounting --------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def active(self) -> int:
        """Jobs assigned to a slot (started or about to)."""
        return sum(s.job is not None for s in self._slots)

    def slot_name(self, slot: int) -> str:
        return self._slots[slot].name

    def is_profile(self, slot: int) -> bool:
        job = self._slots[slot].job
        return job is not None and job.profile

    def running_on(self, device: str) -> list[int]:
        """Slots of ``device`` whose job has started."""
        return [i for i, s in enumerate(self._slots) if s.device == device and s.started is not None]

    def device_of(self, slot: int) -> str:
        return self._slots[slot].device

    def reports(self) -> list[SlotReport]:
        return [
            SlotReport(
                name=s.name,
                device=s.device,
                busy_s=s.busy_s,
                jobs=s.jobs,
                errors=s.errors,
                retired=s.retired,
                last_error=s.last_error,
            )
            for s in self._slots
        ]

    def utilization(self, now: float) -> Utilization:
        self._advance(now)
        busy = sum(s.busy_s for s in self._slots)
        n = len(self._slots)
        start = self._first_submit
        makespan = (self._last_finish - start) if start is not None and self._last_finish is not None else 0.0
        worked = self._work_s + self._idle_s
        return Utilization(
            slots=self.reports(),
            jobs=sum(s.jobs for s in self._slots),
            mean_wait_s=sum(self._waits) / len(self._waits) if self._waits else 0.0,
            max_wait_s=max(self._waits, default=0.0),
            makespan_s=makespan,
            lower_bound_s=busy / n,
            busy_fraction=busy / (n * makespan) if makespan > 0 else 0.0,
            waiting_s=self._waiting_s,
            while_waiting=self._work_s / worked if worked > 0 else 1.0,
        )

    def _advance(self, now: float) -> None:
        """Integrates the accounting from the previous event to ``now`` (the state held in between)."""
        last, self._last = self._last, now if self._last is None else max(now, self._last)
        if last is None or now <= last:
            return
        dt = now - last
        pending = self._waiting or any(s.job is not None and s.started is None for s in self._slots)
        if not pending:
            return
        self._waiting_s += dt
        working = sum(s.started is not None for s in self._slots)
        assigned_idle = sum(s.job is not None and s.started is None for s in self._slots)
        self._work_s += dt * working
        self._idle_s += dt * (assigned_idle + len(self.idle_runnable()))

    def _ordered(self) -> list[_Waiting]:
        return sorted(self._waiting, key=lambda w: (-w.priority, w.seq))

    def _on(self, device: str) -> list[_Slot]:
        return [s for s in self._slots if s.device == device and not s.retired]

    def _live(self, device: str) -> bool:
        return bool(self._on(device))

    def _held(self, device: str) -> bool:
        return any(s.job is not None and s.job.profile for s in self._on(device))

    def _busy_on(self, device: str) -> int:
        return sum(s.job is not None for s in self._on(device))
