"""Evicts a kernel's operands from every cache level before a timed sample (CPU).

``operands``: ``clflush`` (x86) or ``dc civac`` (AArch64) over exactly the input and output buffers, from a
tiny helper library built once with the C compiler; cheap, and precise about what becomes cold.
``buffer``: writes a buffer of twice the last-level cache, which also evicts the kernel's own statics; used
when the helper cannot be built. Both run outside the timed region.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from evoteam.gpu_bench.build.builder import compiler_identity, cxx_compiler, default_cache_root

Flush = Callable[[], None]

_SOURCE = r"""
#include <stddef.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
void evoteam_flush(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) _mm_clflush(p + i);
  if (n) _mm_clflush(p + n - 1);
  _mm_mfence();
}
#elif defined(__aarch64__)
void evoteam_flush(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) __asm__ volatile("dc civac, %0" : : "r"(p + i) : "memory");
  if (n) __asm__ volatile("dc civac, %0" : : "r"(p + n - 1) : "memory");
  __asm__ volatile("dsb ish" : : : "memory");
}
#else
#error "no cache-line flush instruction known for this architecture"
#endif
"""


@functools.cache
def _helper() -> ctypes.CDLL | None:
    """The compiled helper, or None when it cannot be built here (the caller falls back to ``buffer``)."""
    cxx = cxx_compiler()
    key = hashlib.sha256((_SOURCE + compiler_identity(cxx)).encode()).hexdigest()[:16]
    folder = default_cache_root().parent / "flush" / key
    library = folder / "flush.so"
    if not library.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / "flush.c"
        source.write_text(_SOURCE)
        partial = folder / f"flush.{id(folder)}.tmp"
        cmd = [cxx, "-x", "c", "-O2", "-shared", "-fPIC", "-o", str(partial), str(source)]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        partial.replace(library)
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
