"""The machine facts the agents are told: the CPU's model, SIMD, caches and memory as the OS lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoteam.gpu_bench.machine import GpuFacts, MachineFacts, machine_facts

pytestmark = pytest.mark.unit


def test_simd_caches_and_memory_come_from_proc_and_sys(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f amx_tile\n"
    )
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       33554432 kB\nMemFree: 1 kB\n")
    cache = tmp_path / "sys" / "devices" / "system" / "cpu" / "cpu0" / "cache"
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K")]
    ):
        folder = cache / f"index{index}"
        folder.mkdir(parents=True)
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    facts = machine_facts(tmp_path)
    assert facts.simd == ["sse4_2", "avx", "avx2", "fma", "avx512f", "amx_tile"]
    assert facts.caches == ["L1d 48K", "L2 2048K"] and facts.memory_gib == pytest.approx(32.0)
    assert facts.cores >= 1


def test_a_machine_without_proc_or_sys_still_has_facts(tmp_path: Path) -> None:
    facts = machine_facts(tmp_path)
    assert facts.simd == [] and facts.caches == [] and facts.memory_gib is None and facts.cpu


def test_the_text_names_the_gpu_or_says_there_is_none() -> None:
    gpu = GpuFacts(name="NVIDIA H100", compute_capability="9.0", sms=132, memory_gib=79.6, l2_mib=50.0)
    text = MachineFacts(cpu="X", cores=16, simd=["avx2"], caches=["L2 1M"], memory_gib=128, gpus=[gpu]).text()
    assert text.splitlines() == [
        "CPU: X, 16 logical cores available",
        "SIMD: avx2",
        "caches: L2 1M",
        "memory: 128 GiB",
        "GPU: NVIDIA H100, compute capability 9.0, 132 SMs, 80 GiB, L2 50 MiB",
    ]
    assert MachineFacts(cpu="X", cores=2).text().endswith("GPU: none seen by this process")
