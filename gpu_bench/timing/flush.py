"""Evicts a kernel's operands from every cache level before a timed sample (CPU).

``operands``: ``clflush`` (x86) or ``dc civac`` (AArch64) over exactly the input and output buffers, from a
tiny helper library built once with the C compiler (``flush_library``); cheap, and precise about what becomes cold.
``buffer``: writes a buffer of twice the last-level cache, which also evicts the kernel's own statics; used
when the helper cannot be built. Both run outside the timed region.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from evoteam.gpu_bench.timing import flush_library

Flush = Callable[[], None]


@functools.cache
def _helper() -> ctypes.CDLL | None:
    """The compiled helper, or None when it cannot be built here (the caller falls back to ``buffer``)."""
    library = flush_library.library()
    if library is None:
        return None
    try:
        lib = ctypes.CDLL(str(library))
    except OSError:
        return None
    lib.evoteam_flush.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.evoteam_flush.restype = None
    return lib


def operand_flusher(tensors: Sequence[torch.Tensor]) -> Flush | None:
    """A flush of exactly these tensors' bytes, or None when the helper is unavailable."""
    lib = _helper()
    if lib is None:
        return None
    spans = [(t.data_ptr(), t.numel() * t.element_size()) for t in tensors if t.numel()]
    fn = lib.evoteam_flush

    def flush() -> None:
        for pointer, size in spans:
            fn(pointer, size)

    return flush


@functools.cache
def last_level_cache_bytes() -> int:
    best = 0
    for size_file in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = size_file.read_text().strip().upper()
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * mult)
    return best or 32 * 1024**2


@functools.cache
def _flush_buffer() -> np.ndarray:
    return np.zeros(2 * last_level_cache_bytes() // 8, dtype=np.int64)


def buffer_flusher() -> Flush:
    buf = _flush_buffer()

    def flush() -> None:
        np.add(buf, 1, out=buf)

    return flush
