"""A worker's thread policy: how many threads kernels may use and on which CPUs, set explicitly and recorded.

Multi-threaded CPU code (OpenMP, torch's intra-op pool, BLAS) picks its thread count from the environment
when its runtime starts, which for torch's OpenMP is when torch is imported: so the owner puts
``OMP_NUM_THREADS`` and friends into the worker's environment at spawn, and the worker pins itself to the
CPUs and sets torch's pool before anything runs. The policy is part of every result's environment
(``threads`` in its libraries), so two results say whether they ran alike.

OpenMP's threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, unless the owner's environment sets a policy):
they sleep at the end of a parallel region instead of spinning for a while. Spinning threads of the side of a
pair that just ran took the cores the other side's threads needed. With one of two cores burned by another
process, identical kernels benched against each other measured 23 of 27 ratios in [0.97, 1.03] and 25 of 27
intervals holding 1 with spinning, 26 and 27 of 27 without (``benchmarks/self_consistency.py``). The policy
in force is recorded too (``omp_wait_policy``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
WAIT_POLICY = "OMP_WAIT_POLICY"


class ThreadPolicy(BaseModel):
    threads: int = Field(ge=1)
    """Threads a kernel may use (OpenMP, torch, BLAS)."""
    cpus: list[int] = Field(min_length=1)
    """The CPUs the worker runs on (its affinity)."""

    def describe(self) -> str:
        return f"{self.threads} thread{'s' if self.threads != 1 else ''} on CPUs {format_cpus(self.cpus)}"

    def environment(self) -> dict[str, str]:
        return dict.fromkeys(THREAD_VARIABLES, str(self.threads))

    def arguments(self) -> list[str]:
        return ["--threads", str(self.threads), "--cpus", format_cpus(self.cpus)]


def wait_environment(base: Mapping[str, str]) -> dict[str, str]:
    """What to add to a worker's environment ``base`` for OpenMP's wait policy: passive, unless ``base`` sets one."""
    return {} if base.get(WAIT_POLICY, "").strip() else {WAIT_POLICY: "PASSIVE"}


def describe_wait(env: Mapping[str, str]) -> str:
    """The wait policy an environment sets, as a result records it."""
    return env.get(WAIT_POLICY, "").strip() or "unset (OpenMP's default: spin, then sleep)"


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def default_policy(threads: int | None = None, cpus: list[int] | None = None) -> ThreadPolicy:
    """The given CPUs (default: every CPU this process may use) and, unless told, the thread count of
    ``OMP_NUM_THREADS`` where the environment sets one, else one thread per CPU."""
    allowed = allowed_cpus()
    chosen = cpus if cpus else allowed
    outside = sorted(set(chosen) - set(allowed))
    if outside:
        raise ValueError(f"CPUs {format_cpus(outside)} are not available here (available: {format_cpus(allowed)})")
    if threads is None:
        threads = environment_threads() or len(chosen)
    return ThreadPolicy(threads=threads, cpus=chosen)


def environment_threads() -> int | None:
    """The thread count ``OMP_NUM_THREADS`` asks for (its first level, as OpenMP reads ``4,2``); None where it
    is unset; a ValueError where it is not a positive number."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not text:
        return None
    first = text.split(",", 1)[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise ValueError(f"OMP_NUM_THREADS={text!r} is not a positive thread count (write e.g. 4, or unset it)")
    return int(first)


def parse_cpus(text: str) -> list[int]:
    """``0-3,6`` → [0, 1, 2, 3, 6]; a ValueError with the bad part otherwise."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"not a CPU list: {part!r} (write e.g. 0-3,6)") from None
        if low < 0 or high < low:
            raise ValueError(f"not a CPU range: {part!r}")
        cpus.update(range(low, high + 1))
    if not cpus:
        raise ValueError("an empty CPU list")
    return sorted(cpus)


def format_cpus(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 6] → ``0-3,6``."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = prev = ordered[0]
    for cpu in [*ordered[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(ranges)


def apply(policy: ThreadPolicy) -> None:
    """Pins this process to the policy's CPUs and sets torch's pool. The environment is not set here: it must
    be in place before torch loads (``python -m evoteam.gpu_bench.worker`` sets it first)."""
    import torch

    if hasattr(os, "sched_setaffinity"):  # Linux
        os.sched_setaffinity(0, policy.cpus)
    torch.set_num_threads(policy.threads)
