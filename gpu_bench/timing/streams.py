"""Does a CUDA kernel do its work on the stream it is given? The stream audit, once per workload after timing.

CUDA events time the work on the stream the harness passes (torch's current stream, where the timing's
events are). A kernel that launches its work on a stream of its own escapes them and measures as almost
nothing; on the H200 such a kernel PASSED. The audit holds that very stream (a GPU busy-wait at its head),
binds and calls the kernel as timing does, lets the GPU run for a while, and copies the outputs on a second,
non-blocking stream. Nothing ordered after the held stream's head can have run yet, so outputs that changed
were written by work the timing's events do not see: the kernel is rejected. (On the legacy default stream,
work on blocking streams waits for the hold as it waits for the events, so only what escapes the events is
found.) Whether the held stream was still held when the copy finished is asked of the GPU; when it was not
(the call waited for the GPU, or the host was too slow), the audit says it is inconclusive and rejects
nothing. Outputs are poisoned first, so an output written with the same bytes it held still counts as
written. The device sits behind a small Protocol: the logic runs here with a fake.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

HOLD_MIN_MS = 20.0
HOLD_MAX_MS = 2000.0
"""The held stream's busy-wait: ``HOLD_MIN_MS`` plus eight times the kernel's median, at most ``HOLD_MAX_MS``."""


class StreamDevice(Protocol):
    def streams(self) -> tuple[Any, Any]:
        """The stream the kernel is given (the current one, which timing uses), and one that reads its outputs."""
        ...

    def hold(self, ms: float) -> None:
        """A GPU busy-wait of about ``ms`` on the current stream (returns at once on the host)."""
        ...

    def snapshot(self, tensors: Sequence[torch.Tensor], stream: Any) -> list[torch.Tensor]:
        """Copies of ``tensors`` made on ``stream``, waited for."""
        ...

    def busy(self, stream: Any) -> bool:
        """Whether work queued on ``stream`` has not finished yet."""
        ...

    def synchronize(self) -> None: ...


@dataclass(frozen=True)
class StreamAudit:
    verdict: Literal["on-stream", "elsewhere", "inconclusive"]
    detail: str = ""


def audit_streams(
    bind: Callable[[], Callable[[], object]],
    outputs: Mapping[str, torch.Tensor],
    poison: Callable[[], None],
    median_ms: float,
    device: StreamDevice,
    sleep: Callable[[float], None] = time.sleep,
) -> StreamAudit:
    """Binds (``bind``: bindings take the current stream when they bind, Python kernels when they run) and calls
    the kernel once while the stream it is given, the current one, is held, then reads ``outputs``."""
    device.synchronize()
    poison()
    device.synchronize()
    given, observer = device.streams()
    before = device.snapshot(list(outputs.values()), observer)
    # A second copy, dropped at once, leaves its memory in the allocator's cache for the reading stream: the
    # copy made while the stream is held then allocates nothing (an allocation might wait for the GPU).
    spare = device.snapshot(list(outputs.values()), observer)
    spare.clear()
    hold_ms = min(HOLD_MAX_MS, HOLD_MIN_MS + 8 * median_ms)
    call = bind()
    device.hold(hold_ms)
    call()
    sleep(min(hold_ms / 2, 2 * median_ms + 5.0) / 1e3)  # work on another stream gets the time to finish
    after = device.snapshot(list(outputs.values()), observer)
    held = device.busy(given)
    device.synchronize()
    if not held:
        return StreamAudit(
            "inconclusive",
            f"the stream it was given ran its {hold_ms:.0f} ms busy-wait out before its outputs were read (the "
            "call waits for the GPU, or the host was slow)",
        )
    changed = [name for name, a, b in zip(outputs, before, after, strict=True) if not _same_bytes(a, b)]
    if changed:
        return StreamAudit(
            "elsewhere",
            f"output(s) {', '.join(changed)} changed while the stream the kernel was given was held: its work runs "
            "on another stream, which CUDA events on the given stream do not time (launch on the stream the "
            "harness passes, torch.cuda.current_stream())",
        )
    return StreamAudit("on-stream")


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise: NaN poison equals itself."""
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


class TorchStreamDevice:
    """torch's current CUDA device for the audit: its current stream held by the busy-wait of
    ``TorchCudaDevice``, and a stream of torch's pool (non-blocking) that reads the outputs."""

    def __init__(self, hold: Callable[[float], None]) -> None:
        self._hold = hold
        self._observer: Any = None

    def streams(self) -> tuple[Any, Any]:
        if self._observer is None:
            cuda: Any = torch.cuda  # Stream's constructor is untyped
            self._observer = cuda.Stream()
        return torch.cuda.current_stream(), self._observer

    def hold(self, ms: float) -> None:
        self._hold(ms)

    def snapshot(self, tensors: Sequence[torch.Tensor], stream: Any) -> list[torch.Tensor]:
        with torch.cuda.stream(stream):
            copies = [t.clone() for t in tensors]
        stream.synchronize()
        return copies

    def busy(self, stream: Any) -> bool:
        return not bool(stream.query())

    def synchronize(self) -> None:
        torch.cuda.synchronize()
