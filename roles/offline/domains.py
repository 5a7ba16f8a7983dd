"""Which names look like tunable sizes, and the candidate values generated for a knob with no declared values.

Pure functions over names and integers; imports nothing of evoteam.
"""

from __future__ import annotations

import math
import re

# A name is a size knob when one of its words starts with one of these (BLOCK_X, TILE_M, kNumThreads, ...).
_SIZE_WORDS = ("BLOCK", "TILE", "UNROLL", "VEC", "THREAD", "WARP", "TPB", "CHUNK", "STAGE", "PIPE", "SPLIT")
_SIZE_WORDS_MORE = ("GROUP", "ITEMS", "LANE", "STRIP", "PANEL", "STEP", "FACTOR")
# ... or one of its words is exactly one of these (BM, BN, BK of GEMM tilings; MR/NR/KC of BLIS-style blocking).
_SIZE_TOKENS = frozenset(
    {"BM", "BN", "BK", "TM", "TN", "TK", "WM", "WN", "WK", "NB", "TB", "MR", "NR", "KC", "MC", "NC"}
)
# Hardware facts that look like sizes but must not be changed.
_FIXED = frozenset({"WARP_SIZE", "WARPSIZE", "WARP_SZ", "KWARPSIZE", "CACHE_LINE", "CACHE_LINE_SIZE"})

_THREAD_NAMES = re.compile(r"THREAD|TPB|BLOCK_?SIZE|BLOCKDIM|BLOCK_DIM|^BLOCK$")
MAX_DOMAIN = 9
"""At most this many generated values per knob (the nearest to the current one, in log scale)."""


def words(name: str) -> list[str]:
    """The upper-cased words of a C identifier: ``kBlockSize`` → K, BLOCK, SIZE; ``TILE_M`` → TILE, M."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w.upper() for w in spaced.split("_") if w]


def looks_like_size(name: str) -> bool:
    if "".join(words(name)) in {f.replace("_", "") for f in _FIXED} or name.upper() in _FIXED:
        return False
    return any(w in _SIZE_TOKENS or w.startswith(_SIZE_WORDS + _SIZE_WORDS_MORE) for w in words(name))


def _powers_of_two(low: int, high: int) -> list[int]:
    out, value = [], 1
    while value <= high:
        if value >= low:
            out.append(value)
        value *= 2
    return out


def _nearest(values: set[int], current: int, limit: int = MAX_DOMAIN) -> list[int]:
    """The ``limit`` values closest to ``current`` on a log scale, sorted ascending (``current`` always kept)."""

    def distance(v: int) -> float:
        return abs(math.log2(max(v, 1)) - math.log2(max(current, 1)))

    chosen = sorted(values, key=lambda v: (distance(v), v))[:limit]
    if current not in chosen:
        chosen[-1] = current
    return sorted(chosen)


def thread_counts(current: int, cuda: bool) -> list[int]:
    """Threads per block: on CUDA multiples of 32 from 32 to 1024 (powers of two and 3·2^k); elsewhere powers
    of two from current/8 to 8·current."""
    if not cuda:
        return _nearest(set(_powers_of_two(max(1, current // 8), current * 8)) | {current}, current)
    values = set(_powers_of_two(32, 1024)) | {3 * v for v in _powers_of_two(32, 256)}
    return _nearest(values | {current}, current)


def generated_values(name: str, kind: str, current: int, cuda: bool) -> list[int]:
    """A sensible domain for a knob found in the source: 1..8 for unrolls and min-blocks, 1..16 for vector
    widths, 1..6 for pipeline stages, thread counts for thread-like names, otherwise powers of two from
    current/8 to 8·current; always holding the current value."""
    upper = "_".join(words(name))
    if kind in ("unroll",) or "UNROLL" in upper:
        return sorted(set(range(1, 9)) | {current})
    if kind == "launch_min_blocks":
        return sorted(set(range(1, 9)) | {current})
    if kind == "launch_bounds":  # the bound must stay ≥ the block size the kernel launches with
        return [v for v in thread_counts(current, True) if v >= current] or [current]
    if kind == "omp_threads":
        return _nearest(set(_powers_of_two(1, max(8, current * 4))) | {current}, current)
    if kind == "omp_chunk":
        return _nearest(set(_powers_of_two(1, max(16, current * 16))) | {current}, current)
    if any(w.startswith("VEC") for w in words(name)):
        return sorted(set(_powers_of_two(1, 16)) | {current})
    if any(w.startswith("STAGE") or w.startswith("PIPE") for w in words(name)):
        return sorted(set(range(1, 7)) | {current})
    if any(w.startswith("WARP") for w in words(name)):
        return _nearest(set(_powers_of_two(1, 32)) | {current}, current)
    if _THREAD_NAMES.search(upper) and (cuda or "THREAD" in upper) and "PER" not in words(name):
        if cuda and current % 32 == 0:
            return thread_counts(current, True)
        return thread_counts(current, False)
    return _nearest(set(_powers_of_two(max(1, current // 8), max(2, current * 8))) | {current}, current)
