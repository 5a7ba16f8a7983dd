"""The timed phase of one workload, after its correctness trials passed (``evaluate.py``); worker only.

The kernel is timed on one set of buffers whose contents rotate over the last trials' inputs; before every
timed call its outputs are poisoned, and the first timed call plus a random share of the others (drawn from
the system's entropy) are verified outside the clock; after timing one more call on another content is
checked. With an incumbent, the two are timed interleaved (``timing/paired.py``). On a GPU, timing holds the
GPU's lock. Last, the memo check: calls on inputs nobody has seen must be as fast as calls on the timed ones.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from evoteam.gpu_bench.bindings import Call, Hosted, Kernel
from evoteam.gpu_bench.bindings.device import CUDA, synchronize
from evoteam.gpu_bench.schema import Definition, EvaluationStatus
from evoteam.gpu_bench.timing.cpu import time_call
from evoteam.gpu_bench.timing.flush import buffer_flusher, operand_flusher
from evoteam.gpu_bench.timing.gpu import (
    CudaTimer,
    TimingMismatch,
    cross_check,
    current_cuda_device,
    time_cuda_call,
)
from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, device_key, gpu_lock
from evoteam.gpu_bench.timing.paired import Measure, cpu_measure, time_pair
from evoteam.gpu_bench.timing.statistics import PairedStats, TimingStats, net_ms
from evoteam.gpu_bench.timing.streams import TorchStreamDevice, audit_streams
from evoteam.gpu_bench.verify.compare import Errors, Mismatch
from evoteam.gpu_bench.verify.inputs import Value
from evoteam.gpu_bench.worker.evaluate import (
    EvalConfig,
    Trial,
    WorkloadOutcome,
    changed_input,
    check_outputs,
    check_written,
    failure,
    fill_sentinel,
    nan_outputs,
    refill,
)

CHECK_FRACTION = 0.125
"""Share of timed calls (drawn at random, the first always) whose outputs are verified, outside the clock."""
UNSEEN_CALLS = 4
"""Calls on never-seen inputs (and as many on seen ones, interleaved) per round of the memo check."""
UNSEEN_FACTOR = 2.0
"""A kernel that takes this much more time on unseen inputs than on seen ones, fastest call of each, by the
clock and (on the CPU) by CPU time too, is reusing results. Twice, the line past which the adversarial suite
counts a cheat's gain as one: at 3x, a Python memo whose lookup cost a third of its work (2.8x-3.1x by the
clock, 3.5x-3.9x by CPU time) passed about one time in two at over twice its honest speed. What misleads
one clock (preempted calls, a pool thread's CPU time counted in 4 ms ticks) is a factor of 3 or more, and
both clocks must agree, in two rounds."""


@dataclass(frozen=True)
class Unseen:
    """Where the memo check gets inputs nobody has seen (a copy of a timed content with every floating-point
    value perturbed from the system's entropy: the same shapes, indices and lengths, so the same work where
    work depends on the data; None when there is nothing to perturb) and their expected outputs."""

    inputs: Callable[[dict[str, Value]], dict[str, Value] | None]
    expect: Callable[[dict[str, Value]], dict[str, torch.Tensor]]


class TimedCallMismatch(RuntimeError):
    """A timed call, drawn for verification, produced outputs that differ from the reference."""


class IncumbentMismatch(RuntimeError):
    """A timed call of the incumbent, drawn for verification, produced outputs that differ from the reference:
    nothing can be measured against it."""


def time_workload(
    kernel: Kernel,
    definition: Definition,
    axes: dict[str, int],
    contents: list[Trial],
    config: EvalConfig,
    passed: WorkloadOutcome,
    incumbent: Kernel | None = None,
    unseen: Unseen | None = None,
) -> WorkloadOutcome:
    """Times the kernel on one set of buffers whose contents rotate over the last three trials' inputs; the
    outputs are poisoned before every timed call and a random share of timed calls is verified. With
    ``unseen``, the kernel must then be as fast on inputs nobody has seen as on the ones it was timed on."""
    if any(not isinstance(v, torch.Tensor) and v != contents[0].pristine[k] for k, v in contents[-1].pristine.items()):
        contents = contents[-1:]  # scalars are bound by value: rotating tensors alone would mismatch them
    buffers = contents[-1].inputs
    outputs = nan_outputs(definition, axes, kernel.device)
    # With an incumbent, two sets of outputs: the sides trade them from pair to pair, so where a buffer lies
    # (its alignment against the inputs': 4 KiB aliasing cost identical kernels 1.5%) favours neither side.
    sets = [outputs] if incumbent is None else [outputs, nan_outputs(definition, axes, kernel.device)]
    calls = [kernel.bind(buffers, out, axes) for out in sets]
    side = [0]  # the candidate writes sets[side[0]], the incumbent the other one
    returned: list[object] = []
    held: list[object] = []  # what the incumbent's calls returned, released with the candidate's
    last_content = [len(contents) - 1]
    pending: list[tuple[int, int]] = []  # unpaired: (sample, content) of a timed call whose outputs are verified
    drawn = [-1]  # paired: the pair whose calls are verified (after each, outside the timed region)
    draw = random.SystemRandom()  # not seeded: a candidate cannot predict which timed calls are checked

    def produced_by(call: Callable[[], object]) -> object:
        """What the last call of the candidate (``timed``) or of the incumbent returned or wrote."""
        if call is timed:
            return returned[0] if returned else sets[side[0]]
        assert incumbent is not None
        return held[0] if not incumbent.destination_passing else sets[1 - side[0]]

    def verify(call: Callable[[], object], sample: int, content: int) -> None:
        """That call's outputs against the reference's for the inputs it ran on."""
        synchronize(kernel.device)
        verdict = check_outputs(definition, produced_by(call), contents[content].expected, axes, config)
        if isinstance(verdict, Mismatch):
            failed = TimedCallMismatch if call is timed else IncumbentMismatch
            raise failed(f"timed call {sample + 1}: {verdict.reason}")

    def verify_pending() -> None:
        """Unpaired, before the next call: the last one, if it was drawn."""
        if pending:
            sample, content = pending.pop()
            verify(timed, sample, content)

    def verify_paired(after: Callable[[], object]) -> None:
        """Paired, right after each call of a drawn pair, the candidate's and the incumbent's alike (the same
        work after either side's call)."""
        if drawn[0] >= 0:
            verify(after, drawn[0], last_content[0])

    def poison(before: Callable[[], object] | None = None) -> None:
        """Outputs to values a kernel must overwrite: every set, so a kernel finds no answer (the other
        side's, or its own of an earlier call) in the set it is not given; the other side's first, its own
        last (without a flush, what was written last is what the cache holds)."""
        if not (kernel.destination_passing or (incumbent is not None and incumbent.destination_passing)):
            return
        own = side[0] if before is None or before is timed else 1 - side[0]
        for k in sorted(range(len(sets)), key=lambda k: k == own):
            fill_sentinel(sets[k])

    def prepare(before: Callable[[], object]) -> None:
        """Paired, before each call (outside the timed region): the pair's inputs written afresh and the
        outputs poisoned. Every call starts from the same state, first of its pair or second, the incumbent's
        or the candidate's: work done only between pairs made the first call of a pair 4% slower on a CPU (up
        to 15%), and work done for one side only (poisoning, verifying) made identical kernels measure 0.5-2%
        apart. A kernel that writes its inputs leaves the other side nothing changed."""
        refill(buffers, contents[last_content[0]].pristine)
        poison(before)

    def before_sample(i: int) -> None:
        """Outside the timed region: verify the previous call if it was drawn (unpaired), release what the
        calls returned (so no timed region frees memory, and each side allocates with the same memory held),
        rotate the inputs, trade the output sets, and draw whether this call (pair) is verified. Unpaired, the
        inputs are written and the outputs poisoned (every timed call must write them) here; paired, before
        each call (``prepare``)."""
        verify_pending()
        returned.clear()
        held.clear()
        if config.rotate_inputs and len(contents) > 1:
            last_content[0] = i % len(contents)
            if incumbent is None:
                refill(buffers, contents[last_content[0]].pristine)
        side[0] = i % len(sets)
        verified = i == 0 or draw.random() < CHECK_FRACTION
        if incumbent is None:
            poison()
            if verified:
                pending.append((i, last_content[0]))
        else:
            drawn[0] = i if verified else -1

    def timed() -> None:
        result = calls[side[0]]()
        if not kernel.destination_passing:
            returned[:] = [result]

    paired: PairedStats | None = None
    overhead = 0.0  # what timing subtracts from each of the kernel's calls; the memo check does the same
    unchecked: str | None = None  # why the stream audit could not tell, where it could not
    try:
        if incumbent is not None:
            incumbent_calls = [incumbent.bind(buffers, sets[1 - k], axes) for k in range(len(sets))]

            def incumbent_call() -> None:  # as ``timed``: the same work on either side
                result = incumbent_calls[side[0]]()
                if not incumbent.destination_passing:
                    held[:] = [result]

            overheads = _common(
                _round_trip(incumbent, buffers, sets[1], axes),
                _round_trip(kernel, buffers, outputs, axes),
            )
            paired = _time_paired(
                incumbent_call,
                timed,
                kernel.device,
                config,
                before_sample,
                prepare,
                verify_paired,
                buffers,
                {f"set{k}.{name}": t for k, out in enumerate(sets) for name, t in out.items()},
                overheads,
            )
            stats = paired.candidate
            overhead = overheads[1]
            side[0] = 0  # what follows calls the candidate on ``outputs``
        elif kernel.device == CUDA:
            stats = _time_on_gpu(timed, config, before_sample)
        else:
            flush = _cpu_flush(config, buffers, outputs)
            overhead = _round_trip(kernel, buffers, outputs, axes)
            stats = time_call(timed, config.timing, before_sample, flush=flush, overhead_ms=overhead)
        verify_pending()
        # One more call on the other content (or the same, if not rotating), into NaN-filled outputs and
        # on the same addresses as the timed calls: a kernel that skips work once it is timed fails here.
        trial = contents[(last_content[0] + 1) % len(contents)]
        refill(buffers, trial.pristine)
        poison()  # every set: the one it is not given holds the last pair's answers (and stays poisoned)
        timed()
        synchronize(kernel.device)
        if kernel.device == CUDA and kernel.destination_passing:
            unchecked = _audit_streams(kernel, buffers, sets[side[0]], axes, stats.median_ms, config.timeout_s)
    except TimingMismatch as exc:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"while timing: {exc}")
    except IncumbentMismatch as exc:
        reason = (
            "while timing, the incumbent's outputs differ from the reference, so no speedup can be measured "
            f"against it: {exc}"
        )
        return WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=reason)
    except TimedCallMismatch as exc:
        reason = (
            f"the outputs of a timed call differ from the reference (the kernel behaves differently when timed): {exc}"
        )
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=reason)
    except GpuLockTimeout as exc:
        return WorkloadOutcome(status=EvaluationStatus.TIMEOUT, reason=str(exc))
    except Exception as exc:
        return failure(kernel, exc, "while timing: ")
    changed = changed_input(buffers, trial.pristine, frozenset(trial.written))
    if changed:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"input {changed!r} was modified while timed")
    checked = check_outputs(definition, produced_by(timed), trial.expected, axes, config)
    if isinstance(checked, Errors):
        checked = check_written(buffers, trial.written, config, checked)
    if isinstance(checked, Mismatch):
        return WorkloadOutcome(
            status=EvaluationStatus.REJECTED,
            reason=f"outputs after timing differ from the reference (the kernel behaves differently when timed): "
            f"{checked.reason}",
        )
    if unseen is not None:
        try:
            memo = _memo_check(
                kernel, definition, axes, config, timed, buffers, outputs, returned, contents, unseen, overhead
            )
        except Exception as exc:
            return failure(kernel, exc, "on unseen inputs after timing: ")
        if memo is not None:
            return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=memo)
    return passed.model_copy(update={"timing": stats, "paired": paired, "stream_unchecked": unchecked})


def _memo_check(
    kernel: Kernel,
    definition: Definition,
    axes: dict[str, int],
    config: EvalConfig,
    timed: Call,
    buffers: dict[str, Value],
    outputs: dict[str, torch.Tensor],
    returned: list[object],
    contents: list[Trial],
    unseen: Unseen,
    overhead_ms: float,
) -> str | None:
    """Calls on inputs the kernel has seen (the timed ones) and on fresh ones, interleaved, on the same
    buffers: why the kernel is rejected, or None. A kernel that answers from a memo of earlier calls (keyed on
    a hash or a sample of its inputs) does less work only on what it has seen, and its seen calls are faster
    by the clock (what timing rewards). On the CPU the clock alone misleads: a busy machine preempts calls for
    whole scheduler slices, slowing them several-fold. So there the CPU time of the kernel's process must say
    so too, which preemption does not inflate but which misleads alone: a process's CPU clock counts its
    other running threads (an OpenMP pool spinning after a parallel region) only at scheduler ticks, 4 ms
    steps. On a GPU the clock judges alone. The clock's times are net of the native host's round trip, as
    timing's are. A first verdict against the kernel is confirmed by a second round
    on other fresh inputs. The last unseen call's outputs are verified."""
    cpu = _cpu_clock(kernel)
    rounds: list[_MemoRound] = []
    for _ in range(2):
        made = [unseen.inputs(contents[0].pristine) for _ in range(UNSEEN_CALLS)]  # before any call compared
        fresh = [values for values in made if values is not None]
        if not fresh:
            return None  # no floating-point input to perturb: nothing unseen to compare with
        fresh = [{k: v if isinstance(v, torch.Tensor) else buffers[k] for k, v in values.items()} for values in fresh]
        last = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in fresh[-1].items()}
        sample = _MemoRound()
        for values in fresh:  # scalars are bound by value: the unseen inputs keep the bound ones
            for seen, content in ((True, contents[0].pristine), (False, values)):
                refill(buffers, content)
                if kernel.destination_passing:
                    fill_sentinel(outputs)
                synchronize(kernel.device)
                used = cpu() if cpu is not None else None
                start = time.perf_counter()
                timed()
                synchronize(kernel.device)
                wall = net_ms((time.perf_counter() - start) * 1e3, overhead_ms)
                after = cpu() if cpu is not None else None
                work = (after - used) * 1e3 if after is not None and used is not None else None
                sample.add(seen, wall, work)
        changed = changed_input(buffers, last, frozenset(contents[0].written))
        if changed:
            return f"input {changed!r} was modified on unseen inputs"
        produced: object = returned[0] if returned else outputs
        checked = check_outputs(definition, produced, unseen.expect(last), axes, config)
        if isinstance(checked, Mismatch):
            return f"the outputs on unseen inputs differ from the reference: {checked.reason}"
        rounds.append(sample)
        if sample.ratio() <= UNSEEN_FACTOR:
            return None
    mildest = min(rounds, key=lambda r: r.ratio())
    clock, spent = mildest.wall, mildest.cpu
    measured = f"{min(clock[False]):.3f} ms against {min(clock[True]):.3f} ms on the inputs it was timed on"
    if spent is not None:
        measured += f"; CPU time {min(spent[False]):.3f} ms against {min(spent[True]):.3f} ms"
    return (
        f"the kernel takes {mildest.ratio():.1f}x the time on inputs it has not seen ({measured}; twice): it "
        "answers from results of earlier calls"
    )


class _MemoRound:
    """One round of the memo check: the wall-clock and CPU times of seen (True) and unseen (False) calls."""

    def __init__(self) -> None:
        self.wall: dict[bool, list[float]] = {True: [], False: []}
        self.cpu: dict[bool, list[float]] | None = {True: [], False: []}

    def add(self, seen: bool, wall_ms: float, cpu_ms: float | None) -> None:
        self.wall[seen].append(wall_ms)
        if cpu_ms is None:
            self.cpu = None  # one unreadable call: the round is judged on the clock
        elif self.cpu is not None:
            self.cpu[seen].append(cpu_ms)

    def ratio(self) -> float:
        """The fastest unseen call over the fastest seen one by the clock, or by CPU time where that was read
        and says less: the kernel is slower on unseen inputs only as far as both agree."""
        ratios = [_slowdown(self.wall)] + ([_slowdown(self.cpu)] if self.cpu is not None else [])
        return min(ratios)


def _slowdown(times: dict[bool, list[float]]) -> float:
    known = min(times[True])
    return min(times[False]) / known if known > 0 else float("inf")


def _round_trip(
    kernel: Kernel, buffers: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]
) -> float:
    """What timing subtracts from each of the kernel's calls: a native host's empty round trip, else 0."""
    return kernel.round_trip_ms(buffers, outputs, axes) if isinstance(kernel, Hosted) else 0.0


def _common(incumbent_ms: float, candidate_ms: float) -> tuple[float, float]:
    """Where both sides run in native hosts, the smaller of their round trips for both: the two are lower
    bounds of one mechanism's cost, and a difference between two measurements of it would otherwise favour
    one side (identical one-row RMSNorm kernels measured 0.79x, interval 0.77-0.82, before this)."""
    if incumbent_ms > 0 and candidate_ms > 0:
        common = min(incumbent_ms, candidate_ms)
        return common, common
    return incumbent_ms, candidate_ms


def _cpu_clock(kernel: Kernel) -> Callable[[], float | None] | None:
    """Reads the CPU time (seconds) of the process a CPU kernel runs in: the native host's, or this worker's;
    None on a GPU (the work is the device's; the clock alone judges)."""
    if kernel.device == CUDA:
        return None
    if isinstance(kernel, Hosted):
        return kernel.cpu_seconds
    return time.process_time


def _time_paired(
    incumbent: Call,
    candidate: Call,
    device: str,
    config: EvalConfig,
    before_pair: Callable[[int], None],
    prepare: Callable[[Callable[[], object]], None],
    after: Callable[[Callable[[], object]], None],
    buffers: Mapping[str, Value],
    outputs: Mapping[str, torch.Tensor],
    overheads: tuple[float, float],
) -> PairedStats:
    """The incumbent and the candidate interleaved (``timing/paired.py``), ``prepare(call)`` before each call
    and ``after(call)`` after it (outside the timed region); on the CPU less each side's native-host round
    trip; on a GPU under its lock, with CUDA events, and the candidate's wall-clock cross-check afterwards."""
    if device != CUDA:
        flush = _cpu_flush(config, buffers, outputs) or _buffer_flush(config)
        measure = _prepared(prepare, cpu_measure(flush), after)
        return time_pair(incumbent, candidate, config.timing, measure, _call_once, before_pair, overhead_ms=overheads)
    gpu = current_cuda_device()
    with gpu_lock(device_key(gpu.index), wait_s=config.timeout_s):
        timer = CudaTimer(gpu, config.timing.flush_cache)
        measure = _prepared(prepare, timer.measure, after)
        paired = time_pair(incumbent, candidate, config.timing, measure, timer.warm, before_pair)
        wall = cross_check(candidate, gpu, paired.candidate.median_ms)
    own = {"clock": "cuda_events", "sm_clock_mhz": gpu.sm_clock_mhz()}
    flushed = {"flush_bytes": gpu.flush_bytes if config.timing.flush_cache else None}
    return paired.model_copy(
        update={
            "candidate": paired.candidate.model_copy(
                update={**own, **flushed, "launch_ms": timer.launch_ms(candidate), "wall_per_call_ms": wall}
            ),
            "incumbent": paired.incumbent.model_copy(
                update={**own, **flushed, "launch_ms": timer.launch_ms(incumbent)}
            ),
        }
    )


def _prepared(
    prepare: Callable[[Callable[[], object]], None], measure: Measure, after: Callable[[Callable[[], object]], None]
) -> Measure:
    def measured(call: Callable[[], object]) -> float:
        prepare(call)
        elapsed = measure(call)
        after(call)
        return elapsed

    return measured


def _call_once(call: Callable[[], object]) -> None:
    call()


def _buffer_flush(config: EvalConfig) -> Callable[[], None]:
    return buffer_flusher() if config.timing.flush_cache else _no_flush


def _no_flush() -> None:
    return None


def _cpu_flush(
    config: EvalConfig, buffers: Mapping[str, Value], outputs: Mapping[str, torch.Tensor]
) -> Callable[[], None] | None:
    if config.timing.flush_cache and config.timing.flush_method == "operands":
        tensors = [v for v in buffers.values() if isinstance(v, torch.Tensor)] + list(outputs.values())
        return operand_flusher(tensors)
    return None


def _audit_streams(
    kernel: Kernel, buffers: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int],
    median_ms: float, wait_s: float,
) -> str | None:  # fmt: skip
    """The stream audit (``timing/streams.py``) on these outputs, under the GPU's lock (its busy-wait would
    disturb another worker's timing): TimingMismatch when the kernel's work runs on another stream than the
    one it is given; why not, where the audit could not tell (the workload is flagged); None where it ran on
    the stream. The outputs are left as the kernel wrote them."""
    gpu = current_cuda_device()
    with gpu_lock(device_key(gpu.index), wait_s=wait_s):
        found = audit_streams(
            lambda: kernel.bind(buffers, outputs, axes),
            outputs,
            lambda: fill_sentinel(outputs),
            median_ms,
            TorchStreamDevice(gpu.hold),
        )
    if found.verdict == "elsewhere":
        raise TimingMismatch(found.detail)
    return found.detail if found.verdict == "inconclusive" else None


def _time_on_gpu(timed: Call, config: EvalConfig, before_sample: Callable[[int], None]) -> TimingStats:
    """CUDA-event timing while holding this GPU's lock: two workers never time on one GPU at once."""
    device = current_cuda_device()
    with gpu_lock(device_key(device.index), wait_s=config.timeout_s):
        return time_cuda_call(timed, config.timing, device, before_sample)
