"""The facts of the machine candidates run on, for the agents' prompt: the CPU (model, cores, SIMD, caches,
memory) from the operating system, and the GPU (name, compute capability, SMs, memory, L2) from torch when
it sees one. Reading them never fails: a fact that cannot be read is left out."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.environment import cpu_name

SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "neon",
    "asimd",
    "sve",
    "sve2",
)
"""The vector extensions worth telling a kernel engineer about, as ``/proc/cpuinfo`` names them."""


class GpuFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    compute_capability: str
    sms: int
    memory_gib: float
    l2_mib: float | None = None


class MachineFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpu: str
    cores: int
    """Logical CPUs this process may run on."""
    simd: list[str] = Field(default_factory=list)
    caches: list[str] = Field(default_factory=list)
    """``L1d 48K``, ``L2 2048K``, ``L3 105M`` (per core or shared, as the OS lists them)."""
    memory_gib: float | None = None
    gpus: list[GpuFacts] = Field(default_factory=list)

    def text(self) -> str:
        lines = [f"CPU: {self.cpu}, {self.cores} logical cores available"]
        if self.simd:
            lines.append(f"SIMD: {', '.join(self.simd)}")
        if self.caches:
            lines.append(f"caches: {', '.join(self.caches)}")
        if self.memory_gib is not None:
            lines.append(f"memory: {self.memory_gib:.0f} GiB")
        for gpu in self.gpus:
            l2 = f", L2 {gpu.l2_mib:g} MiB" if gpu.l2_mib is not None else ""
            lines.append(
                f"GPU: {gpu.name}, compute capability {gpu.compute_capability}, {gpu.sms} SMs, "
                f"{gpu.memory_gib:.0f} GiB{l2}"
            )
        if not self.gpus:
            lines.append("GPU: none seen by this process")
        return "\n".join(lines)


def machine_facts(root: Path = Path("/")) -> MachineFacts:
    """This machine's facts (``root``: where ``/proc`` and ``/sys`` are, for tests)."""
    return MachineFacts(
        cpu=cpu_name(),
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        simd=_simd(root),
        caches=_caches(root),
        memory_gib=memory_gib(root),
        gpus=_gpus(),
    )


def _simd(root: Path) -> list[str]:
    try:
        text = (root / "proc" / "cpuinfo").read_text()
    except OSError:
        return []
    flags: set[str] = set()
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip().lower()
        if key in ("flags", "features") and ":" in line:
            flags.update(line.split(":", 1)[1].split())
    return [f for f in SIMD_FLAGS if f in flags]


def _caches(root: Path) -> list[str]:
    found = []
    for index in sorted((root / "sys" / "devices" / "system" / "cpu" / "cpu0" / "cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        found.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    return found


def memory_gib(root: Path = Path("/")) -> float | None:
    """This machine's memory (``MemTotal``) in GiB, None where it cannot be read."""
    try:
        for line in (root / "proc" / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gpus() -> list[GpuFacts]:
    """The GPUs torch sees, when torch is already loaded (importing it only for this is not worth it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    try:
        if not torch.cuda.is_available():
            return []
        out = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            l2 = getattr(p, "L2_cache_size", None)
            out.append(
                GpuFacts(
                    name=p.name,
                    compute_capability=f"{p.major}.{p.minor}",
                    sms=p.multi_processor_count,
                    memory_gib=p.total_memory / 1024**3,
                    l2_mib=l2 / 1024**2 if isinstance(l2, int) and l2 > 0 else None,
                )
            )
        return out
    except Exception:  # a broken driver is not a reason to lose the prompt
        return []
