"""A candidate that leaves the worker's process state changed (signal handlers, rounding, subnormals,
environment) does not sabotage the next one: the worker that ran it says what changed and is replaced."""

from __future__ import annotations

import dataclasses
import platform

import pytest

from conftest import Bench, quick_config
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.gpu_bench.worker.process_state import capture, differences


@pytest.mark.unit
def test_an_unchanged_process_reads_the_same_twice() -> None:
    assert differences(capture(), capture()) == []


@pytest.mark.unit
def test_each_kind_of_change_is_named() -> None:
    before = dataclasses.replace(capture(), timers=(0.0, 0.0, 0.0))  # pytest-timeout may have an alarm armed
    handlers = dict(before.handlers)
    handlers["SIGALRM"] = 0xDEAD
    after = dataclasses.replace(
        before,
        handlers=handlers,
        timers=(1.0, 0.0, 0.0),
        rounding=(before.rounding or 0) + 0x800,
        subnormals=(False, False),
        cpus=frozenset({999}),
        environ=before.environ | {"OMP_NUM_THREADS=1"},
        cwd="/elsewhere",
    )
    found = "; ".join(differences(before, after))
    for phrase in ("SIGALRM", "alarm", "rounding", "subnormal", "affinity", "OMP_NUM_THREADS", "/elsewhere"):
        assert phrase in found


@pytest.mark.integration
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the kernel sets flush-to-zero through SSE")
def test_the_worker_a_candidate_left_changed_is_replaced(bench: Bench, runner: LocalRunner) -> None:
    """Called in the worker's own process (no isolation), the candidate's changes reach the worker: it is
    replaced, and the log says what changed."""
    in_process = quick_config(isolate=False)
    bench("honest.cpp", in_process, only={"small-1000"})  # a warm worker
    starts = runner.worker_starts
    left = bench("leaves_state.cpp", in_process, only={"small-1000"})
    assert left.status == EvaluationStatus.PASSED  # its own result stands
    log = left.traces[0].evaluation.log if left.traces[0].evaluation else ""
    assert "left process state changed" in log
    for phrase in ("SIGALRM", "rounding mode (upward)", "subnormal", "OMP_NUM_THREADS", "worker was replaced"):
        assert phrase in log, log
    after = bench("honest.cpp", in_process, only={"small-1000"})
    assert after.status == EvaluationStatus.PASSED
    assert runner.worker_starts > starts
    clean = after.traces[0].evaluation.log if after.traces[0].evaluation else ""
    assert "left process state changed" not in clean


@pytest.mark.integration
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the kernel sets flush-to-zero through SSE")
def test_in_its_native_host_a_candidate_cannot_change_the_worker(bench: Bench, runner: LocalRunner) -> None:
    """Isolated (the default), the same candidate changes only its own host process, which ends with the
    request: the worker stays as it was and is not replaced."""
    bench("honest.cpp", only={"small-1000"})
    starts = runner.worker_starts
    left = bench("leaves_state.cpp", only={"small-1000"})
    assert left.status == EvaluationStatus.PASSED
    log = left.traces[0].evaluation.log if left.traces[0].evaluation else ""
    assert "left process state changed" not in log
    assert "changed its host's process state" in log and "contained" in log  # reported all the same
    assert "signal handlers" in log and "floating-point state" in log
    after = bench("honest.cpp", only={"small-1000"})
    assert after.status == EvaluationStatus.PASSED
    assert runner.worker_starts == starts
