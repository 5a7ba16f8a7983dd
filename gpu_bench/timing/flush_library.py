"""The flush helper library: ``clflush`` (x86) or ``dc civac`` (AArch64) over a span, built once per compiler
into evoteam's cache folder (beside the build cache) and loaded by ``flush.py``.

The worker makes sure it exists when it starts, before it gives up writing there (``worker/writes.py``): from
then on no candidate can replace the library that later workers load. No numpy or torch here.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from evoteam.gpu_bench.build.builder import compiler_identity, cxx_compiler, default_cache_root

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


def library() -> Path | None:
    """The built library (built now if it is missing), or None when it cannot be built here."""
    cxx = cxx_compiler()
    key = hashlib.sha256((_SOURCE + compiler_identity(cxx)).encode()).hexdigest()[:16]
    folder = default_cache_root().parent / "flush" / key
    built = folder / "flush.so"
    if built.is_file():
        return built
    try:
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / "flush.c"
        source.write_text(_SOURCE)
    except OSError:
        return None
    partial = folder / f"flush.{id(folder)}.tmp"
    cmd = [cxx, "-x", "c", "-O2", "-shared", "-fPIC", "-o", str(partial), str(source)]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    partial.replace(built)
    return built
