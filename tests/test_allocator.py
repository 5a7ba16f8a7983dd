"""The worker's heap policy (``worker/allocator.py``): the thresholds a worker gets, how results describe them,
and that with them a kernel's large temporaries stop costing page faults once warm."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evoteam.gpu_bench.worker import allocator
from evoteam.gpu_bench.worker.client import worker_environment

# Three 16 MiB temporaries a call, freed together: the median page faults of one call, over 20 calls after a
# warm-up of 5 (a small allocation landing among the freed blocks can make the heap grow once more, rarely).
PROBE = """
import resource, statistics, torch
def call():
    bufs = [torch.empty(4 << 20) for _ in range(3)]
    for b in bufs: b.fill_(1)
    del bufs
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5): call()
counts = []
for _ in range(20):
    start = faults(); call(); counts.append(faults() - start)
print(statistics.median(counts))
"""


@pytest.mark.unit
def test_the_thresholds_are_added_where_unset_and_described() -> None:
    assert allocator.environment({}) == {
        "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
        "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    }
    assert allocator.environment({"MALLOC_TRIM_THRESHOLD_": "0"}) == {"MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
    assert allocator.describe(allocator.environment({})) == "glibc mmap threshold 32 MiB, trim threshold 256 MiB"
    assert allocator.describe({}) == "glibc mmap threshold adaptive, trim threshold adaptive"
    assert allocator.describe({"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "x"}) == (
        "glibc mmap threshold 65536 bytes, trim threshold 'x'"
    )


def _faults_per_call(env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


@pytest.mark.integration
def test_in_a_worker_environment_an_allocating_kernel_stops_faulting() -> None:
    """glibc's adaptive thresholds depend on what a process freed before, so a fresh process cannot show the
    state that cost the paged-attention references 3.5x; a low fixed threshold stands in for it (every large
    block mapped anew), and the probe must see it before its zero under the worker's thresholds counts."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    mapping = _faults_per_call({**base, "MALLOC_MMAP_THRESHOLD_": str(128 << 10)})
    fixed = _faults_per_call(worker_environment(None, base))
    assert mapping >= 3 * 4096, f"the probe saw {mapping} page faults per call with every block mapped anew"
    assert fixed == 0, f"{fixed} page faults per call with the worker's thresholds"
