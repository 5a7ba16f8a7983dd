"""The GPU queue: the pure scheduler under a fake clock, and the threaded queue with fake and real runners."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.remote.gpu_queue import Factory, FnJob, GpuQueue, JobResult, JobStatus, QueueClosed
from evoteam.gpu_bench.remote.queue_runner import QueueRunner
from evoteam.gpu_bench.remote.scheduling import Outcome, Scheduler, SlotReport
from evoteam.gpu_bench.runner import BenchInputError, LocalRunner, Runner
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Workload
from evoteam.gpu_bench.verify.reference import reference_solution

# --- the pure scheduler, driven by a discrete-event simulation -----------------------------------------


@dataclass
class SimJob:
    arrival: float
    duration: float
    profile: bool = False
    priority: int = 0


@dataclass
class SimRun:
    ticket: int
    slot: int
    start: float
    end: float


def simulate(
    devices: list[str], jobs: list[SimJob], check: Callable[[Scheduler], None]
) -> tuple[Scheduler, list[SimRun]]:
    """Runs ``jobs`` through a Scheduler on a fake clock; ``check`` sees the state after every dispatch."""
    sched = Scheduler(devices)
    arrivals = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival)
    running: dict[int, tuple[int, float]] = {}  # slot -> (ticket, start)
    runs: list[SimRun] = []
    now = 0.0
    while arrivals or running or sched.waiting:
        next_arrival = jobs[arrivals[0]].arrival if arrivals else float("inf")
        next_end = min((start + jobs[t].duration for t, start in running.values()), default=float("inf"))
        now = min(next_arrival, next_end)
        for slot, (ticket, start) in list(running.items()):
            if start + jobs[ticket].duration <= now:
                sched.finished(slot, now, Outcome.DONE)
                runs.append(SimRun(ticket, slot, start, now))
                del running[slot]
        while arrivals and jobs[arrivals[0]].arrival <= now:
            i = arrivals.pop(0)
            sched.add(i, now, jobs[i].profile, jobs[i].priority)
        for slot, ticket in sched.dispatch(now):
            sched.started(slot, now)
            running[slot] = (ticket, now)
        check(sched)
    return sched, runs


def random_jobs(n: int, seed: int, profile_every: int = 0) -> list[SimJob]:
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(n):
        t += rng.expovariate(4.0)
        out.append(SimJob(t, rng.uniform(0.1, 1.0), profile=bool(profile_every) and i % profile_every == 0))
    return out


@pytest.mark.unit
def test_scheduler_is_work_conserving_with_one_slot_per_device() -> None:
    jobs = random_jobs(200, seed=1, profile_every=7)

    def no_idle(sched: Scheduler) -> None:
        assert sched.idle_runnable() == [], "a free slot could run a waiting job"

    sched, runs = simulate(["gpu0", "gpu1"], jobs, no_idle)
    assert sorted(r.ticket for r in runs) == list(range(200))
    use = sched.utilization(max(r.end for r in runs))
    assert use.while_waiting == pytest.approx(1.0)
    assert use.waiting_s > 0
    assert use.lower_bound_s == pytest.approx(sum(j.duration for j in jobs) / 2)
    assert use.makespan_s >= use.lower_bound_s


@pytest.mark.unit
def test_scheduler_profile_job_holds_its_device_and_is_not_starved() -> None:
    # Two slots on gpu0, one on gpu1; a stream of normal jobs with a profile job early in it.
    jobs = [SimJob(0.01 * i, 0.5) for i in range(40)]
    jobs[5].profile = True
    sched, runs = simulate(["gpu0", "gpu0", "gpu1"], jobs, lambda s: None)
    prof = next(r for r in runs if r.ticket == 5)
    device = sched.device_of(prof.slot)
    overlapping = [
        r
        for r in runs
        if r.ticket != 5 and sched.device_of(r.slot) == device and r.start < prof.end and r.end > prof.start
    ]
    assert overlapping == []
    assert prof.start < 2.0, "the profile job waited behind later normal jobs"


@pytest.mark.unit
def test_scheduler_fifo_then_priority() -> None:
    jobs = [SimJob(0.0, 1.0, priority=p) for p in (0, 0, 5, 0, 5)]
    _, runs = simulate(["gpu0"], jobs, lambda s: None)
    assert [r.ticket for r in sorted(runs, key=lambda r: r.start)] == [2, 4, 0, 1, 3]


@pytest.mark.unit
def test_scheduler_retires_a_failing_slot() -> None:
    sched = Scheduler(["gpu0", "gpu1"], max_consecutive_errors=2)
    for ticket in range(2):
        sched.add(ticket, 0.0)
        ((slot, _),) = sched.dispatch(0.0)
        sched.started(slot, 0.0)
        retired = sched.finished(slot, 1.0, Outcome.INFRA_ERROR, "lost")
    assert retired and sched.reports()[0].retired  # both went to the first free slot
    assert sched.reports()[0].errors == 2 and sched.reports()[0].last_error == "lost"
    sched.add(9, 2.0)
    assert sched.dispatch(2.0) == [(1, 9)]


# --- the threaded queue with fake runners -----------------------------------------------------------------


@dataclass
class FakeRunner:
    """Sleeps for a job's known duration and records when it ran; can be told to fail."""

    device: str
    log: list[tuple[str, str, float, float]]
    failures: int = 0
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def work(self, tag: str, seconds: float) -> str:
        start = time.monotonic()
        with self.lock:
            if self.failures > 0:
                self.failures -= 1
                raise ConnectionError(f"{self.device} lost")
        time.sleep(seconds)
        self.log.append((tag, self.device, start, time.monotonic()))
        return tag

    def close(self) -> None:
        self.closed = True


def sleep_job(tag: str, seconds: float, profile: bool = False, priority: int = 0) -> FnJob[FakeRunner, str]:
    return FnJob(lambda r: r.work(tag, seconds), profile=profile, priority=priority)


def run_agents(queue: GpuQueue[FakeRunner], durations: list[list[float]]) -> list[JobResult[str]]:
    """One thread per agent; each evaluates its jobs one after another (blocking), as agents do."""
    results: list[JobResult[str]] = []
    lock = threading.Lock()

    def agent(a: int) -> None:
        for j, d in enumerate(durations[a]):
            r = queue.evaluate(sleep_job(f"a{a}j{j}", d))
            with lock:
                results.append(r)

    threads = [threading.Thread(target=agent, args=(a,)) for a in range(len(durations))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.integration
def test_six_agents_two_slots_keep_both_busy() -> None:
    log: list[tuple[str, str, float, float]] = []
    rng = random.Random(7)
    durations = [[rng.uniform(0.04, 0.08) for _ in range(6)] for _ in range(6)]
    queue = GpuQueue([FakeRunner("gpu0", log), FakeRunner("gpu1", log)])
    results = run_agents(queue, durations)
    use = queue.utilization()
    queue.close()
    assert len(results) == 36 and all(r.status is JobStatus.DONE for r in results)
    assert sorted(r.unwrap() for r in results) == sorted(f"a{a}j{j}" for a in range(6) for j in range(6))
    assert use.jobs == 36 and use.mean_wait_s > 0  # six agents, two slots: jobs waited
    # Both slots worked, side by side (counts and overlaps, not shares of the wall time, which a busy machine
    # skews; that a free slot never idles while a job waits is the scheduler's test above).
    per_device = {device: sum(1 for _, d, _, _ in log if d == device) for device in ("gpu0", "gpu1")}
    assert min(per_device.values()) >= 9, per_device
    on = {device: [(start, end) for _, d, start, end in log if d == device] for device in ("gpu0", "gpu1")}
    assert any(a < d and c < b for a, b in on["gpu0"] for c, d in on["gpu1"]), "the two slots never ran at once"


@pytest.mark.integration
def test_fifo_order_and_priority_on_one_slot() -> None:
    log: list[tuple[str, str, float, float]] = []
    gate = threading.Event()
    queue = GpuQueue([FakeRunner("gpu0", log)])
    first = queue.submit(FnJob(lambda r: gate.wait(5.0)))
    futures = [queue.submit(sleep_job(f"j{i}", 0.001)) for i in range(8)]
    urgent = queue.submit(sleep_job("urgent", 0.001, priority=1))
    gate.set()
    assert first.result().status is JobStatus.DONE
    assert [f.result().unwrap() for f in futures] == [f"j{i}" for i in range(8)]
    assert urgent.result().unwrap() == "urgent"
    queue.close()
    assert [tag for tag, *_ in log] == ["urgent"] + [f"j{i}" for i in range(8)]


@pytest.mark.integration
def test_profile_job_runs_alone_on_its_device() -> None:
    log: list[tuple[str, str, float, float]] = []
    # Two slots share gpu0, a third is gpu1; six agents keep normal jobs coming.
    queue = GpuQueue(
        [FakeRunner("gpu0", log), FakeRunner("gpu0", log), FakeRunner("gpu1", log)], devices=["gpu0", "gpu0", "gpu1"]
    )
    agents = threading.Thread(target=run_agents, args=(queue, [[0.03] * 8 for _ in range(6)]))
    agents.start()
    time.sleep(0.05)
    submitted = time.monotonic()
    profiled = queue.evaluate(sleep_job("profile", 0.1, profile=True))
    agents.join()
    queue.close()
    assert profiled.status is JobStatus.DONE
    (_, device, start, end) = next(e for e in log if e[0] == "profile")
    overlaps = [e for e in log if e[0] != "profile" and e[1] == device and e[2] < end and e[3] > start]
    assert overlaps == []
    # Not starved: on its device only jobs already queued before it (one per agent, at most) started while it
    # waited; none of the normal jobs the agents kept submitting went ahead of it.
    ahead = [e for e in log if e[0] != "profile" and e[1] == device and submitted <= e[2] < start]
    assert len(ahead) <= 6, ahead
    assert len(log) == 49


@pytest.mark.integration
def test_infrastructure_errors_are_reported_and_never_lose_jobs() -> None:
    log: list[tuple[str, str, float, float]] = []
    broken = FakeRunner("gpu1", log, failures=100)
    reported: list[SlotReport] = []
    queue = GpuQueue([FakeRunner("gpu0", log), broken], on_slot_error=lambda report, exc: reported.append(report))
    results = run_agents(queue, [[0.01] * 5 for _ in range(6)])
    slots = queue.slots()
    queue.close()
    assert len(results) == 30
    lost = [r for r in results if r.status is JobStatus.INFRA_ERROR]
    assert len(lost) == 3 and all("ConnectionError" in r.error and r.slot == "slot1" for r in lost)
    assert all(r.status is JobStatus.DONE for r in results if r not in lost)
    assert slots[1].retired and slots[1].errors == 3 and "gpu1 lost" in slots[1].last_error
    assert not slots[0].retired and slots[0].jobs == 27
    assert [r.name for r in reported] == ["slot1"] * 3
    assert broken.closed  # close() closes the runners it was given


@pytest.mark.integration
def test_a_factory_slot_gets_a_new_runner_after_a_failure() -> None:
    log: list[tuple[str, str, float, float]] = []
    made: list[FakeRunner] = []

    def make() -> FakeRunner:
        made.append(FakeRunner("gpu0", log, failures=1 if not made else 0))
        return made[-1]

    with GpuQueue([Factory(make)]) as queue:
        first = queue.evaluate(sleep_job("a", 0.001))
        second = queue.evaluate(sleep_job("b", 0.001))
    assert first.status is JobStatus.INFRA_ERROR and second.unwrap() == "b"
    assert len(made) == 2 and made[0].closed and made[1].closed


@pytest.mark.integration
def test_a_job_error_is_the_jobs_not_the_slots() -> None:
    def bad(runner: FakeRunner) -> str:
        raise BenchInputError("missing blob x.safetensors")

    with GpuQueue([FakeRunner("gpu0", [])], max_consecutive_errors=1) as queue:
        result = queue.evaluate(FnJob(bad))
        after = queue.evaluate(sleep_job("ok", 0.001))
        slots = queue.slots()
    assert result.status is JobStatus.JOB_ERROR
    with pytest.raises(BenchInputError, match="missing blob"):
        result.unwrap()
    assert after.unwrap() == "ok" and not slots[0].retired and slots[0].errors == 0


@pytest.mark.unit
def test_every_slot_retired_hands_waiting_jobs_back() -> None:
    gate = threading.Event()
    runner = FakeRunner("gpu0", [], failures=1)

    def blocked(r: FakeRunner) -> str:
        gate.wait(5.0)
        return r.work("x", 0.0)

    queue = GpuQueue([runner], max_consecutive_errors=1)
    first = queue.submit(FnJob(blocked))
    waiting = [queue.submit(sleep_job(f"w{i}", 0.001)) for i in range(3)]
    gate.set()
    assert first.result().status is JobStatus.INFRA_ERROR
    assert [f.result(timeout=5).status for f in waiting] == [JobStatus.INFRA_ERROR] * 3
    queue.close()


def _blocked_queue() -> tuple[
    GpuQueue[FakeRunner], threading.Event, Future[JobResult[bool]], list[Future[JobResult[str]]]
]:
    gate = threading.Event()
    queue = GpuQueue([FakeRunner("gpu0", []), FakeRunner("gpu1", [])])
    running = [queue.submit(FnJob(lambda r: gate.wait(5.0))) for _ in range(2)]
    waiting = [queue.submit(sleep_job(f"w{i}", 0.001)) for i in range(4)]
    return queue, gate, running[0], waiting


@pytest.mark.integration
def test_close_drains_waiting_jobs() -> None:
    queue, gate, running, waiting = _blocked_queue()
    threading.Timer(0.05, gate.set).start()
    queue.close(drain=True)
    assert running.result().unwrap() is True
    assert [f.result().unwrap() for f in waiting] == ["w0", "w1", "w2", "w3"]
    with pytest.raises(QueueClosed):
        queue.submit(sleep_job("late", 0.001))


@pytest.mark.unit
def test_close_without_drain_cancels_waiting_jobs_and_finishes_running_ones() -> None:
    queue, gate, running, waiting = _blocked_queue()
    threading.Timer(0.05, gate.set).start()
    queue.close(drain=False)
    assert running.result().status is JobStatus.DONE
    assert [f.result().status for f in waiting] == [JobStatus.CANCELLED] * 4
    with pytest.raises(Exception, match="cancelled"):
        waiting[0].result().unwrap()


@pytest.mark.integration
def test_an_agent_can_cancel_a_waiting_job() -> None:
    queue, gate, _, waiting = _blocked_queue()
    assert waiting[1].cancel()
    gate.set()
    queue.close()
    assert [waiting[i].result().unwrap() for i in (0, 2, 3)] == ["w0", "w2", "w3"]
    assert queue.utilization().jobs == 5


# --- real runners: two LocalRunner slots behind per-agent Evaluators ------------------------------------------


@pytest.mark.integration
def test_evaluators_share_two_local_runner_slots(definition: Definition, workloads: list[Workload]) -> None:
    queue: GpuQueue[Runner] = GpuQueue([Factory(LocalRunner), Factory(LocalRunner)])
    results = []

    def agent() -> None:
        evaluator = Evaluator(QueueRunner(queue))
        base = reference_solution(definition)
        results.append(
            evaluator.evaluate(definition, workloads[:2], kernel_solution("honest.cpp"), base, quick_config())
        )

    agents = [threading.Thread(target=agent) for _ in range(3)]
    for t in agents:
        t.start()
    for t in agents:
        t.join()
    use = queue.utilization()
    queue.close()
    assert [r.status for r in results] == [EvaluationStatus.PASSED] * 3
    assert use.jobs == 6 and all(s.jobs > 0 for s in use.slots)
