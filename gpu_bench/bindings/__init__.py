"""Calling conventions: load a built solution and bind it to concrete inputs and outputs.

Every binding turns (inputs, outputs, axes) into a zero-argument ``Call`` so that the timed region holds
nothing but the call itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

import torch

from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.gpu_bench.verify.inputs import Value

Call = Callable[[], object]
"""Runs the kernel once. Destination-passing kernels fill the bound outputs; others return their outputs."""


class KernelLoadError(RuntimeError):
    """The artifact was built but cannot be loaded or has no such entry point."""


class KernelCallError(RuntimeError):
    """The kernel reported a failure (non-zero return code, an exception)."""


class KernelRaised(KernelCallError):
    """The kernel raised an exception in its host process: the message is the exception's type and text."""


class KernelOutputError(KernelCallError):
    """A value-returning kernel's result does not fit its outputs (their count, a shape or a dtype), as its
    host found when it copied the result into them: ``status`` is what that earns."""

    def __init__(self, status: EvaluationStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class KernelIntegrityError(KernelCallError):
    """The kernel tampered with the harness around it (forged a message to its host): a rejection, not a crash."""


class Kernel(Protocol):
    destination_passing: bool
    device: str
    """Where its tensors live and it runs: ``cpu`` or ``cuda`` (inputs, outputs and the reference follow)."""

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        """Prepares one call; ``outputs`` is empty for value-returning kernels."""
        ...


@runtime_checkable
class Hosted(Protocol):
    """A kernel that runs in a process of its own (the native host), called over a round trip."""

    def cpu_seconds(self) -> float | None:
        """CPU time used so far by every thread of the kernel's process; None when it has none running."""
        ...

    def round_trip_ms(
        self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]
    ) -> float:
        """The fastest round trip of an empty kernel through the same mechanism on the same buffers: a lower
        bound of the part of every call that is the host, not the kernel."""
        ...
