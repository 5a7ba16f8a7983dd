"""GPU timing: warm-up by time, an L2 flush outside the timed region, CUDA events around each call.

Per sample: the caller's input rotation, then a write of twice the L2 cache, then a hold (both on the current
stream, before the start event), then start event → call → stop event, then a device-wide synchronize. The
hold is a GPU busy-wait somewhat longer than the host takes to launch one call (``CudaTimer``): the stream is
still busy with it when the call's work is queued, so the start event is reached only then and the events
see the GPU's work, not the host's launch (a binding whose launch takes 40 µs of Python around a 5 µs kernel
otherwise measured 45 µs). The launch's host time is reported apart (``TimingStats.launch_ms``). The events
are on torch's current stream, where every binding launches. A kernel that puts its work on another stream
would escape them, so the events are cross-checked by the wall clock over back-to-back calls; when the two
disagree wildly the timing fails (a short kernel on another stream escapes that too: ``streams.py`` audits
where its work runs). The device sits behind a small Protocol, so the logic runs here with a fake.
"""

from __future__ import annotations

import functools
import importlib
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

from evoteam.gpu_bench.timing.paired import warm_up
from evoteam.gpu_bench.timing.statistics import TimingConfig, TimingStats, relative_noise, summarize_samples

MIN_FLUSH_BYTES = 64 * 1024**2
"""Used when the device does not report its L2 size."""
CROSS_CHECK_MS = 20.0
"""The back-to-back cross-check runs for about this long (at least 3 and at most 200 calls)."""
WALL_FACTOR = 2.0
WALL_SLACK_MS = 1.0
"""The wall clock may exceed the events by this factor plus this slack before the timing fails."""
HOLD_FACTOR = 2.0
HOLD_MIN_MS = 0.01
HOLD_MAX_MS = 5.0
"""The hold before a sample: this factor times the slowest recent launch's host time, within these bounds."""
RECENT_LAUNCHES = 16


class Event(Protocol):
    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both complete)."""
        ...


class CudaDevice(Protocol):
    flush_bytes: int

    def synchronize(self) -> None: ...

    def record(self) -> Event:
        """An event recorded now on the current stream."""
        ...

    def flush_l2(self) -> None:
        """Writes ``flush_bytes`` on the current stream, evicting L2."""
        ...

    def hold(self, ms: float) -> None:
        """Keeps the current stream busy for about ``ms`` (a GPU busy-wait), returning at once on the host."""
        ...

    def sm_clock_mhz(self) -> int | None: ...


class TimingMismatch(RuntimeError):
    """The events saw much less time than the wall clock: the kernel's work is not on the current stream."""


def flush_buffer_bytes(l2_bytes: int) -> int:
    """Twice the L2 cache, rounded up to a MiB (at least ``MIN_FLUSH_BYTES`` when the size is unknown)."""
    if l2_bytes <= 0:
        return MIN_FLUSH_BYTES
    mib = 1024**2
    return -(-2 * l2_bytes // mib) * mib


def time_cuda_call(
    call: Callable[[], object],
    config: TimingConfig,
    device: CudaDevice,
    before_sample: Callable[[int], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> TimingStats:
    """Times ``call`` with CUDA events; exceptions of ``call`` (and CUDA errors) propagate."""
    timer = CudaTimer(device, config.flush_cache, clock)
    warm_calls = warm_up(lambda: timer.warm(call), config, clock)
    samples: list[float] = []
    stop_at = clock() + int(config.max_time_s * 1e9)
    while len(samples) < config.max_samples:
        if before_sample is not None:
            before_sample(len(samples))
        samples.append(timer.measure(call))
        if len(samples) >= config.min_samples and (relative_noise(samples) < config.target_noise or clock() > stop_at):
            break
    clock_mhz = device.sm_clock_mhz()
    stats = summarize_samples(samples, warm_calls)
    wall = cross_check(call, device, stats.median_ms, clock)
    return stats.model_copy(
        update={
            "clock": "cuda_events",
            "wall_per_call_ms": wall,
            "sm_clock_mhz": clock_mhz,
            "flush_bytes": device.flush_bytes if config.flush_cache else None,
            "launch_ms": timer.launch_ms(call),
        }
    )


class CudaTimer:
    """Untimed (``warm``) and timed (``measure``) calls on one device, for single and paired timing
    (``paired.py``). Each call's host time (its launch, when the call does not wait for the GPU) is kept per
    call; a timed call is preceded by the L2 flush, if asked, and a hold of ``HOLD_FACTOR`` times the slowest
    of the last ``RECENT_LAUNCHES`` launches of any call (the first, from the warm-up's)."""

    def __init__(self, device: CudaDevice, flush: bool, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.device, self.flush, self.clock = device, flush, clock
        self._launches: dict[int, list[float]] = {}
        self._recent: list[float] = []

    def warm(self, call: Callable[[], object]) -> None:
        """One untimed call, waited for (warm-up by time must not queue more work than it measures)."""
        self._launch(call)
        self.device.synchronize()

    def measure(self, call: Callable[[], object]) -> float:
        """One call between CUDA events on the current stream, in ms."""
        if not self._recent:  # a first call measured here: its launch's host time sizes the hold (before the
            self.warm(call)  # flush, which this call would otherwise undo)
        if self.flush:
            self.device.flush_l2()
        self.device.hold(min(HOLD_MAX_MS, max(HOLD_MIN_MS, HOLD_FACTOR * max(self._recent))))
        start = self.device.record()
        self._launch(call)
        end = self.device.record()
        self.device.synchronize()
        return start.elapsed_ms(end)

    def launch_ms(self, call: Callable[[], object]) -> float | None:
        """The median host time of ``call``'s launches (None: never called)."""
        times = self._launches.get(id(call))
        return statistics.median(times) if times else None

    def _launch(self, call: Callable[[], object]) -> None:
        began = self.clock()
        call()
        ms = (self.clock() - began) / 1e6
        self._launches.setdefault(id(call), []).append(ms)
        self._recent = [*self._recent[1 - RECENT_LAUNCHES :], ms]


def cross_check(
    call: Callable[[], object], device: CudaDevice, median_ms: float, clock: Callable[[], int] = time.perf_counter_ns
) -> float:
    """Wall time per call of back-to-back calls; TimingMismatch if the events on the current stream saw
    much less. Honest work on the current stream keeps the two within microseconds of each other."""
    calls = max(3, min(200, math.ceil(CROSS_CHECK_MS / max(median_ms, 1e-3))))
    device.synchronize()
    began = clock()
    first = device.record()
    for _ in range(calls):
        call()
    last = device.record()
    device.synchronize()  # device-wide: waits for work on every stream
    wall_ms = (clock() - began) / 1e6
    events_ms = first.elapsed_ms(last)
    if wall_ms > WALL_FACTOR * events_ms + WALL_SLACK_MS:
        raise TimingMismatch(
            f"{calls} back-to-back calls took {wall_ms:.3f} ms of wall time but {events_ms:.3f} ms between CUDA "
            "events on the current stream: the kernel's work runs on another stream (launch on the stream the "
            "harness passes, torch.cuda.current_stream())"
        )
    return wall_ms / calls


class TorchCudaDevice:
    """torch's current CUDA device: events, a flush buffer of twice its L2, the SM clock from NVML."""

    def __init__(self, index: int | None = None) -> None:
        self.index = torch.cuda.current_device() if index is None else index
        l2 = int(getattr(torch.cuda.get_device_properties(self.index), "L2_cache_size", 0) or 0)
        self.flush_bytes = flush_buffer_bytes(l2)
        self._buffer: torch.Tensor | None = None
        self._fills = 0
        self._cycles: float | None = None

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.index)

    def record(self) -> Event:
        cuda: Any = torch.cuda  # Event's constructor is untyped
        event = cuda.Event(enable_timing=True)
        event.record()
        return _TorchEvent(event)

    def flush_l2(self) -> None:
        if self._buffer is None:
            self._buffer = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=self.index)
        self._fills = (self._fills + 1) & 0x7FFFFFFF
        self._buffer.fill_(self._fills)  # a new value each time: no write can be skipped as unchanged

    def hold(self, ms: float) -> None:
        cuda: Any = torch.cuda  # _sleep is untyped
        cuda._sleep(max(1, int(ms * self._cycles_per_ms())))

    def _cycles_per_ms(self) -> float:
        """What ``torch.cuda._sleep`` spins per ms on this device, measured once with events."""
        if self._cycles is None:
            cuda: Any = torch.cuda  # _sleep and Event's constructor are untyped
            cuda._sleep(1_000_000)  # the first call loads the kernel
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            cuda._sleep(10_000_000)
            end.record()
            end.synchronize()
            self._cycles = 10_000_000 / max(float(start.elapsed_time(end)), 1e-3)
        return self._cycles

    def sm_clock_mhz(self) -> int | None:
        """The SM clock in MHz through NVML (pynvml), which torch maps to this device; None without it."""
        try:
            importlib.import_module("pynvml")
            return int(torch.cuda.clock_rate(self.index))
        except Exception:
            return None


@functools.cache
def current_cuda_device() -> TorchCudaDevice:
    """The device torch uses in this process (one per worker), kept with its flush buffer."""
    return TorchCudaDevice()


class _TorchEvent:
    def __init__(self, event: torch.cuda.Event) -> None:
        self.event = event

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, _TorchEvent):
            raise TypeError("both events must come from the same device")
        return float(self.event.elapsed_time(end.event))
