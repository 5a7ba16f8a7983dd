"""A worker's heap policy: glibc malloc's thresholds fixed, so an allocating kernel costs the same in any process.

glibc adapts two thresholds to what a process freed before: the size from which an allocation gets a fresh
mapping of its own, and how much free memory at the top of the heap it gives back to the system. Two processes
running the same kernel (the worker with the reference, a Python host with the candidate) can settle into
different states. The FlashInfer paged-attention references convert an 8 MiB KV cache to float32 on every call:
in one state those temporaries come back from the heap, in the other each call maps them anew and takes about
8000 page faults, 3.5 times slower. Measured against itself, such a kernel got speedups of 0.25 and 3 that
repeated on every retry.

Setting both thresholds switches the adaptation off. Allocations under 32 MiB (the largest threshold glibc
accepts) are served from the heap once warm, and a freed top under 256 MiB stays in the process; larger
allocations are mapped on every call, in every process alike. A value the user set in the environment is kept,
and the policy in force is part of every result's environment (``malloc`` in its libraries).
"""

from __future__ import annotations

from collections.abc import Mapping

MMAP_THRESHOLD = "MALLOC_MMAP_THRESHOLD_"
TRIM_THRESHOLD = "MALLOC_TRIM_THRESHOLD_"
DEFAULTS = {MMAP_THRESHOLD: 32 << 20, TRIM_THRESHOLD: 256 << 20}


def environment(base: Mapping[str, str]) -> dict[str, str]:
    """The thresholds to add to an environment ``base`` for a worker: those that ``base`` does not set."""
    return {name: str(value) for name, value in DEFAULTS.items() if name not in base}


def describe(env: Mapping[str, str]) -> str:
    """The heap policy an environment sets, e.g. ``glibc mmap threshold 32 MiB, trim threshold 256 MiB``."""
    parts = []
    for label, name in (("mmap threshold", MMAP_THRESHOLD), ("trim threshold", TRIM_THRESHOLD)):
        text = env.get(name)
        parts.append(f"{label} {_size(text)}" if text is not None else f"{label} adaptive")
    return "glibc " + ", ".join(parts)


def _size(text: str) -> str:
    value = text.strip()
    if value.isdigit() and int(value) and int(value) % (1 << 20) == 0:
        return f"{int(value) >> 20} MiB"
    return f"{value} bytes" if value.isdigit() else repr(value)
