"""Running out of memory has its own reason: an allocation that fails inside the worker, and a worker the
kernel's OOM killer ends (told apart from another SIGKILL by the machine's OOM kill count)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import KERNELS, Bench, quick_config
from evoteam.gpu_bench.bindings import KernelCallError, host
from evoteam.gpu_bench.bindings.python_host import PythonHostKernel
from evoteam.gpu_bench.schema import Definition, EvaluationStatus
from evoteam.gpu_bench.worker import client, memory
from evoteam.gpu_bench.worker.memory import is_out_of_memory


@pytest.mark.unit
def test_the_oom_kill_count_is_read_from_vmstat(tmp_path: Path) -> None:
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 12\noom_kill 7\npgfault 99\n")
    assert memory.oom_kills(vmstat) == 7
    vmstat.write_text("nr_free_pages 12\n")
    assert memory.oom_kills(vmstat) is None
    assert memory.oom_kills(tmp_path / "missing") is None


@pytest.mark.unit
def test_a_sigkill_is_called_out_of_memory_only_when_the_oom_count_rose() -> None:
    assert memory.killed_for_memory(3, 4).startswith("out of memory: the kernel's OOM killer ended the worker")
    assert "not from the OOM killer" in memory.killed_for_memory(3, 3)
    assert "most often the kernel's OOM killer" in memory.killed_for_memory(None, 4)


@pytest.mark.unit
def test_failed_allocations_are_recognised() -> None:
    try:
        torch.empty(1 << 50)
    except RuntimeError as exc:
        assert memory.is_out_of_memory(exc)
    assert memory.is_out_of_memory(MemoryError())
    assert not memory.is_out_of_memory(RuntimeError("shape mismatch"))
    assert not memory.is_out_of_memory(ValueError("out of memory"))  # only the allocators' errors


@pytest.mark.integration
def test_an_allocation_the_worker_cannot_make_is_out_of_memory(bench: Bench) -> None:
    result = bench("allocates_too_much.py", only={"small-1000"})
    assert result.status == EvaluationStatus.RUNTIME_ERROR
    assert result.workloads[0].reason.startswith("out of memory: RuntimeError"), result.workloads[0].reason


@pytest.mark.integration
def test_a_worker_killed_while_the_oom_count_rises_is_out_of_memory(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = iter(range(100, 200))
    monkeypatch.setattr(client, "oom_kills", lambda: next(counts))  # the kernel's count, rising on every read
    in_process = quick_config(isolate=False)  # the Python candidate in the worker: its SIGKILL ends the worker
    result = bench("sigkills_itself.py", in_process, only={"small-1000"})
    assert result.status == EvaluationStatus.RUNTIME_ERROR
    assert "out of memory: the kernel's OOM killer ended the worker" in result.workloads[0].reason
    monkeypatch.setattr(client, "oom_kills", lambda: 5)  # steady: another SIGKILL
    result = bench("sigkills_itself.py", in_process, only={"small-1000"})
    assert "died from signal SIGKILL (Killed), not from the OOM killer" in result.workloads[0].reason


@pytest.mark.integration
def test_a_python_host_killed_while_the_oom_count_rises_is_out_of_memory(
    bench: Bench, definition: Definition, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = bench("sigkills_itself.py", only={"small-1000"})  # in its Python host: the worker lives on
    assert result.status == EvaluationStatus.RUNTIME_ERROR
    assert "the kernel crashed the Python host (killed by SIGKILL)" in result.workloads[0].reason
    counts = iter(range(100, 200))
    monkeypatch.setattr(host, "oom_kills", lambda: next(counts))  # the kernel's count, rising on every read
    kernel = PythonHostKernel(str(KERNELS), "sigkills_itself.py", "run", definition, True)
    x = torch.randn(16)
    call = kernel.bind({"x": x, "y": x}, {"out": torch.empty(16)}, {"n": 16})
    with pytest.raises(KernelCallError, match="OOM killer: out of memory") as raised:
        call()
    assert is_out_of_memory(raised.value)  # so the reason starts "out of memory:"
    kernel.release()
