"""Smoke test of benchmarks/adversarial.py: it reads every case's header, and ``--quick`` on two cases prints the
cases table, the controls, the totals and the isolate on/off throughput."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from conftest import KERNELS, benchmark_script


@pytest.fixture(scope="module")
def script() -> Iterator[ModuleType]:
    with benchmark_script("adversarial") as module:
        yield module


@pytest.mark.unit
def test_every_case_header_is_read(script: ModuleType) -> None:
    cases = script.load_cases()
    files = {p.name for p in (KERNELS / "adversarial").iterdir() if p.suffix in (".cpp", ".py")}
    assert {c.name for c in cases} == files - {"control_slow.cpp"}
    assert {c.number for c in cases} == {str(n) for n in (*range(1, 10), 11)}  # 10: the GPU cases (.cu)
    fixed = next(c for c in cases if c.name == "fixed_table.cpp")
    assert fixed.workload == "fixed-4096" and fixed.workloads_file.name == "fixed_scale_add.jsonl"
    assert next(c for c in cases if c.name == "lying_tensor.py").value_returning
    assert next(c for c in cases if c.name == "memo_sampled.cpp").expected == {"neutralized", "rejected"}


@pytest.mark.integration
def test_quick_run_prints_the_tables(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    code = script.main(["--quick", "--cases", "fixed_table,skip_unless_poisoned"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| case | category | workload | expected | status | flags | speedup | verdict | lint | why |" in out
    assert "| `fixed_table.cpp` | 6 fixed inputs | fixed-4096 | flagged or neutralized or rejected |" in out
    assert "| `skip_unless_poisoned.cpp` |" in out
    assert "cases tried: 2;" in out and "false rejections among honest controls: 0 of 6" in out  # large, fixed
    assert "| isolate=True |" in out and "| isolate=False |" in out
    assert "isolate=True / isolate=False time per workload:" in out


@pytest.mark.integration
def test_the_throughput_alone_on_two_threads(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    code = script.main(["--only-throughput", "--quick", "--threads", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| case |" not in out and "cases tried" not in out
    assert "1 round(s), alternating, 2 thread(s);" in out
    assert "isolate=True / isolate=False time per workload:" in out
