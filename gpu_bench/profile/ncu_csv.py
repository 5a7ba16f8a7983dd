"""Nsight Compute's ``--csv --page raw`` output parsed into typed per-kernel results (no process is run here)."""

from __future__ import annotations

import csv
import math

from pydantic import BaseModel, Field


class SpeedOfLight(BaseModel):
    """``SpeedOfLight``: how close the kernel came to the GPU's peak compute and memory throughput."""

    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    l1tex_throughput_pct: float | None = None
    l2_throughput_pct: float | None = None
    elapsed_cycles: float | None = None
    sm_frequency_hz: float | None = None
    dram_frequency_hz: float | None = None


class Occupancy(BaseModel):
    """``Occupancy``: warps resident per SM, in theory and as measured, and what limits the blocks per SM."""

    theoretical_pct: float | None = None
    achieved_pct: float | None = None
    achieved_active_warps: float | None = None
    block_limit_registers: float | None = None
    block_limit_shared_mem: float | None = None
    block_limit_warps: float | None = None
    block_limit_sm: float | None = None


class MemoryWorkload(BaseModel):
    """``MemoryWorkloadAnalysis``: DRAM traffic and bandwidth, cache hit rates."""

    dram_bytes_read: float | None = None
    dram_bytes_written: float | None = None
    dram_bandwidth_bytes_per_s: float | None = None
    l1_hit_rate_pct: float | None = None
    l2_hit_rate_pct: float | None = None


class KernelProfile(BaseModel):
    """One profiled kernel launch (a row of ncu's raw page)."""

    id: int
    name: str
    block_size: str = ""
    grid_size: str = ""
    device: str = ""
    compute_capability: str = ""
    duration_us: float | None = None
    registers_per_thread: float | None = None
    speed_of_light: SpeedOfLight = Field(default_factory=SpeedOfLight)
    occupancy: Occupancy = Field(default_factory=Occupancy)
    memory: MemoryWorkload = Field(default_factory=MemoryWorkload)
    raw: dict[str, str] = Field(default_factory=dict)
    """Every column as ncu printed it (metric name → value)."""
    units: dict[str, str] = Field(default_factory=dict)
    """The unit of each column that has one."""


# typed field → (the metric names that carry it, newest first; the dimension its unit must have)
_Spec = tuple[tuple[str, ...], str]
_SOL: dict[str, _Spec] = {
    "sm_throughput_pct": (("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    "memory_throughput_pct": (("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    "dram_throughput_pct": (
        (
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        "%",
    ),
    "l1tex_throughput_pct": (("l1tex__throughput.avg.pct_of_peak_sustained_active",), "%"),
    "l2_throughput_pct": (("lts__throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    "elapsed_cycles": (("gpc__cycles_elapsed.max", "sm__cycles_elapsed.max"), "cycle"),
    "sm_frequency_hz": (("gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"), "freq"),
    "dram_frequency_hz": (("dram__cycles_elapsed.avg.per_second",), "freq"),
}
_OCCUPANCY: dict[str, _Spec] = {
    "theoretical_pct": (("sm__maximum_warps_per_active_cycle_pct",), "%"),
    "achieved_pct": (("sm__warps_active.avg.pct_of_peak_sustained_active",), "%"),
    "achieved_active_warps": (("sm__warps_active.avg.per_cycle_active",), "count"),
    "block_limit_registers": (("launch__occupancy_limit_registers",), "count"),
    "block_limit_shared_mem": (("launch__occupancy_limit_shared_mem",), "count"),
    "block_limit_warps": (("launch__occupancy_limit_warps",), "count"),
    "block_limit_sm": (("launch__occupancy_limit_blocks",), "count"),
}
_MEMORY: dict[str, _Spec] = {
    "dram_bytes_read": (("dram__bytes_read.sum",), "byte"),
    "dram_bytes_written": (("dram__bytes_write.sum",), "byte"),
    "dram_bandwidth_bytes_per_s": (("dram__bytes.sum.per_second",), "rate"),
    "l1_hit_rate_pct": (("l1tex__t_sector_hit_rate.pct",), "%"),
    "l2_hit_rate_pct": (("lts__t_sector_hit_rate.pct",), "%"),
}
_DURATION: _Spec = (("gpu__time_duration.sum",), "time")
_REGISTERS: _Spec = (("launch__registers_per_thread",), "count")

_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def _unit(unit: str) -> tuple[str, float]:
    """(dimension, factor to SI) of one of ncu's units: ``usecond``, ``Mbyte``, ``Gbyte/second``, ``Ghz``."""
    unit = unit.strip()
    if unit in ("", "%"):
        return ("%" if unit else "count"), 1.0
    if "/" in unit:
        top, bottom = unit.split("/", 1)
        (dt, ft), (db, fb) = _unit(top), _unit(bottom)
        if db == "time" and dt == "byte":
            return "rate", ft / fb
        if db == "time" and dt == "cycle":
            return "freq", ft / fb
        return "count", 1.0  # register/thread, inst/cycle, ...
    if unit in _TIME:
        return "time", _TIME[unit]
    for base, dimension in (("byte", "byte"), ("cycle", "cycle"), ("hz", "freq")):
        if unit.lower().endswith(base):
            prefix = unit[: len(unit) - len(base)]
            if prefix in _PREFIX:
                return dimension, _PREFIX[prefix]
    return "count", 1.0


def number(value: str) -> float | None:
    """A value as ncu prints it (``1,234.5``, ``n/a``) as a float, or None."""
    text = value.strip().replace(",", "")
    try:
        result = float(text)
    except ValueError:
        return None
    return result if math.isfinite(result) else None


def _typed(raw: dict[str, str], units: dict[str, str], spec: _Spec) -> float | None:
    """The first of the spec's metrics that is present, in SI units; None if absent, not a number or in a unit
    of another dimension."""
    names, dimension = spec
    name = next((n for n in names if n in raw), None)
    value = number(raw[name]) if name is not None else None
    if name is None or value is None:
        return None
    unit = units.get(name, "")
    got, factor = _unit(unit)
    if dimension == "count" or got == dimension or (not unit and dimension == "%"):
        return value * factor
    return None


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e6


def _section(raw: dict[str, str], units: dict[str, str], specs: dict[str, _Spec]) -> dict[str, float | None]:
    return {name: _typed(raw, units, spec) for name, spec in specs.items()}


def parse_raw_csv(text: str) -> tuple[list[KernelProfile], list[str]]:
    """ncu's ``--csv --page raw`` output → the kernels and ncu's own message lines.

    The first CSV row names the columns, the second (whose ID cell is empty) gives units, then one row per
    profiled kernel. Lines ncu prints for itself (``==PROF== ...``) may come before, between or after.
    """
    messages = [line.strip() for line in text.splitlines() if line.startswith("==")]
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return [], messages
    rows = list(csv.reader(lines[start:]))
    header, body = rows[0], rows[1:]
    unit_row: list[str] = []
    if body and body[0] and body[0][0] == "":
        unit_row, body = body[0], body[1:]
    kernels = []
    for row in body:
        if len(row) != len(header):
            continue  # a torn line (ncu killed mid-write)
        raw = dict(zip(header, row, strict=True))
        units = {n: u for n, u in zip(header, unit_row, strict=False) if u}
        kernels.append(
            KernelProfile(
                id=int(number(raw.get("ID", "")) or 0),
                name=raw.get("Kernel Name", ""),
                block_size=raw.get("Block Size", ""),
                grid_size=raw.get("Grid Size", ""),
                device=raw.get("Device", ""),
                compute_capability=raw.get("CC", ""),
                duration_us=_us(_typed(raw, units, _DURATION)),
                registers_per_thread=_typed(raw, units, _REGISTERS),
                speed_of_light=SpeedOfLight(**_section(raw, units, _SOL)),
                occupancy=Occupancy(**_section(raw, units, _OCCUPANCY)),
                memory=MemoryWorkload(**_section(raw, units, _MEMORY)),
                raw=raw,
                units=units,
            )
        )
    return kernels, messages
