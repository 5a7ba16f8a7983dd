"""The default size cap of an import: how many MiB of tensors one workload may hold, from this machine's memory.

A workload's inputs and outputs live several times over while it is evaluated (three trials' worth kept for
the timed rotation, pristine copies to check inputs unchanged, the reference's outputs, NaN-filled output
buffers), so an import leaves out, by default, workloads whose tensors exceed one sixteenth of the memory they
will run in: the GPU's for a CUDA target, else this machine's RAM. ``--max-mb`` sets another cap (``inf``:
none).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from evoteam.gpu_bench.build.cuda.nvcc import resolve_arch
from evoteam.gpu_bench.machine import memory_gib

SHARE = 16
"""The cap is the memory divided by this."""
GIB = 1024**3


class SizeCap(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mb: float
    """MiB of input and output tensors one workload may hold."""
    why: str
    """Where the number comes from, for the import's output."""


def gpu_gib() -> float | None:
    """The first GPU's memory: from torch when it sees a GPU, else from ``nvidia-smi``; None without one."""
    try:
        import torch

        if torch.cuda.is_available():
            return float(torch.cuda.get_device_properties(0).total_memory) / GIB
    except Exception:  # a broken driver: ask nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
        return float(out.splitlines()[0]) / 1024  # MiB
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def default_cap(
    target: str,
    ram: Callable[[], float | None] | None = None,
    gpu: Callable[[], float | None] | None = None,
) -> SizeCap | None:
    """1/``SHARE`` of the GPU's memory for a CUDA ``target`` (of the RAM when no GPU is seen here), of the RAM
    for ``cpu``; None when neither can be read (no cap). ``ram`` and ``gpu`` read the memory in GiB (default:
    ``memory_gib`` and ``gpu_gib``)."""
    ram = ram or memory_gib
    gpu = gpu or gpu_gib
    if resolve_arch([target]) is not None:
        memory = gpu()
        if memory is not None:
            return _cap(memory, f"the GPU's {memory:.1f} GiB")
        memory = ram()
        if memory is not None:
            return _cap(memory, f"this machine's {memory:.1f} GiB of RAM; no GPU seen here")
        return None
    memory = ram()
    return _cap(memory, f"this machine's {memory:.1f} GiB of RAM") if memory is not None else None


def cap_for(max_mb: float | None, target: str) -> SizeCap | None:
    """The cap an import or a run uses: ``max_mb`` when one was given (``--max-mb``), else ``default_cap``."""
    return SizeCap(mb=max_mb, why="--max-mb") if max_mb is not None else default_cap(target)


def _cap(gib: float, where: str) -> SizeCap:
    return SizeCap(mb=round(gib * 1024 / SHARE, 1), why=f"1/{SHARE} of {where}; --max-mb sets another, inf none")
