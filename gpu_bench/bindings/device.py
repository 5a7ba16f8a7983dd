"""The device a kernel runs on, and the CUDA facts the evaluator needs: sync, stream, is an error the GPU's.

Nothing here starts CUDA unless asked about a ``cuda`` device, so CPU-only machines never touch it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

CPU = "cpu"
CUDA = "cuda"

_CUDA_ERROR_MARKS = ("CUDA error", "CUDA_ERROR_", "cudaError", "an illegal memory access", "unspecified launch failure")


def device_for(target_hardware: Sequence[str]) -> str:
    """``cpu`` when every target is ``cpu``; otherwise the solution targets a GPU (``sm_90a``, ``H100``...)."""
    return CPU if all(t.lower() == CPU for t in target_hardware) else CUDA


def synchronize(device: str) -> None:
    """Waits for all work on the device (every stream); raises the GPU's error if a kernel faulted."""
    if device == CUDA:
        torch.cuda.synchronize()


def cuda_healthy() -> bool:
    """False when the CUDA context is in an error state (a sticky fault: nothing more can run in it)."""
    try:
        torch.cuda.synchronize()
    except Exception:
        return False
    return True


def is_device_error(exc: BaseException) -> bool:
    """An error reported by CUDA itself (torch, pycuda, or a message that carries a CUDA error)."""
    accelerator = getattr(torch, "AcceleratorError", None)
    if isinstance(accelerator, type) and isinstance(exc, accelerator):
        return True
    if type(exc).__module__.startswith("pycuda"):
        return True
    text = str(exc)
    return any(mark in text for mark in _CUDA_ERROR_MARKS)


def current_stream_handle() -> int:
    """torch's current CUDA stream as a ``cudaStream_t`` value (0 is the legacy default stream)."""
    return int(torch.cuda.current_stream().cuda_stream)


def cuda_error_name(code: int) -> str | None:
    """The CUDA runtime's text for an error code, or None if ``code`` is not one it knows."""
    if code <= 0:
        return None
    cuda: Any = torch.cuda  # cudart() is untyped
    try:
        cudart = cuda.cudart()
    except Exception:
        return None
    text = ""
    for as_arg in (lambda: cudart.cudaError(code), lambda: code):  # a pybind enum, or a plain int in some builds
        try:
            text = str(cudart.cudaGetErrorString(as_arg()))
            break
        except Exception:
            continue
    return None if not text or "unrecognized" in text.lower() else text
