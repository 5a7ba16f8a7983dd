"""Kernels that try to cheat or crash get the right non-PASSED status; honest kernels pass."""

from __future__ import annotations

import pytest

from conftest import QUICK_TIMING, Bench, quick_config
from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.gpu_bench.worker import client

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("filename", ["honest.cpp", "honest.py", "prints.cpp"])
def test_honest_kernels_pass_every_workload(bench: Bench, filename: str) -> None:
    result = bench(filename)
    assert result.status == S.PASSED, [w.reason for w in result.workloads]
    assert result.summary.passed == result.summary.total == 3
    assert result.summary.geomean_speedup is not None and result.summary.geomean_speedup > 0
    for w in result.workloads:
        assert w.timing is not None and w.timing.n >= 5
        assert w.speedup is not None and w.speedup > 0


@pytest.mark.parametrize("method", ["operands", "buffer"])
def test_honest_kernel_passes_with_each_cache_flush(bench: Bench, method: str) -> None:
    timing = QUICK_TIMING.model_copy(update={"flush_cache": True, "flush_method": method})
    result = bench("honest.cpp", quick_config(timing=timing), only={"large-65536"})
    assert result.status == S.PASSED
    assert result.workloads[0].timing is not None and result.workloads[0].timing.median_ms > 0


def test_kernel_output_lands_in_the_log_not_the_protocol(bench: Bench) -> None:
    result = bench("prints.cpp", only={"small-1000"})
    assert result.status == S.PASSED
    log = result.traces[0].evaluation.log  # type: ignore[union-attr]
    assert "hello from the kernel, n=1000" in log
    assert '"id": 999' in log


def test_a_chatty_kernel_keeps_only_the_tail_of_its_log(bench: Bench) -> None:
    result = bench("chatty.cpp", only={"small-1000"})
    assert result.status == S.PASSED
    log = result.traces[0].evaluation.log  # type: ignore[union-attr]
    assert "bytes cut" in log and log.rstrip().endswith("chatty line 19999")
    assert len(log) < 25_000


def test_a_kernel_that_prints_without_end_keeps_the_log_bounded(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """Printing until its timeout, a kernel wrote 544 MiB into the log in 10 s here: the owner empties the
    log each time it finds it over the limit, and the answer says so."""
    monkeypatch.setattr(client, "LOG_LIMIT_BYTES", 1 << 20)
    result = bench("prints_forever.cpp", quick_config(timeout_s=3.0), only={"small-1000"})
    assert result.status == S.TIMEOUT
    log = result.traces[0].evaluation.log  # type: ignore[union-attr]
    assert "[evoteam: the kernel printed more than 1 MiB; the log was emptied" in log, log[-600:]
    assert len(log) < 10_000  # a tail and the note (the tail may be short: the log can be emptied just before)


@pytest.mark.parametrize(
    ("filename", "status", "phrase"),
    [
        ("partial_write.cpp", S.INCORRECT_NUMERICAL, "non-finite"),
        ("previous_output.py", S.INCORRECT_NUMERICAL, "trial"),
        ("pointer_cache.cpp", S.INCORRECT_NUMERICAL, "trial"),  # in the native host, mappings move too
        ("modifies_input.cpp", S.REJECTED, "modified its input 'x'"),
        ("first_trial_only.cpp", S.INCORRECT_NUMERICAL, "on trial 2"),
        ("timing_cheat.cpp", S.REJECTED, "behaves differently when timed"),
        ("returns_error.cpp", S.RUNTIME_ERROR, "returned 7"),
        ("raises.py", S.RUNTIME_ERROR, "this kernel always fails"),
        ("wrong_shape.py", S.INCORRECT_SHAPE, "shape"),
        ("wrong_dtype.py", S.INCORRECT_DTYPE, "float64"),
    ],
)
def test_cheating_and_broken_kernels_are_caught(bench: Bench, filename: str, status: S, phrase: str) -> None:
    result = bench(filename, only={"small-1000"})
    assert result.status == status, result.workloads[0].reason
    assert phrase in result.workloads[0].reason
    assert result.summary.geomean_speedup is None
    evaluation = result.traces[0].evaluation
    assert evaluation is not None and evaluation.status == status and evaluation.performance is None


def test_patching_torch_in_the_python_host_patches_only_the_candidate_s_own_torch(bench: Bench) -> None:
    result = bench("patches_torch.py", only={"small-1000"})
    assert result.status == S.INCORRECT_NUMERICAL  # the reference, in the worker, keeps torch's own multiply
    honest = bench("honest.py", only={"small-1000"})
    assert honest.status == S.PASSED


def test_patching_torch_to_fool_the_reference_in_process_is_rejected_and_the_worker_replaced(bench: Bench) -> None:
    in_process = quick_config(isolate=False)
    result = bench("patches_torch.py", in_process, only={"small-1000"})
    assert result.status == S.REJECTED
    assert "torch.Tensor.__rmul__" in result.workloads[0].reason
    honest = bench("honest.py", in_process, only={"small-1000"})  # a clean worker: the patch is gone
    assert honest.status == S.PASSED


def test_a_candidate_cannot_leave_torch_single_threaded_for_the_next(bench: Bench) -> None:
    import torch

    result = bench("sets_threads.py", only={"small-1000"})
    assert result.status == S.PASSED
    probe = bench("thread_probe.py", only={"small-1000"})
    assert probe.status == S.PASSED
    assert f"threads={torch.get_num_threads()}" in probe.traces[0].evaluation.log  # type: ignore[union-attr]


def test_compile_error_is_a_status_with_the_compiler_log(bench: Bench) -> None:
    result = bench("compile_error.cpp")
    assert result.status == S.COMPILE_ERROR
    assert all(t.evaluation is not None and t.evaluation.status == S.COMPILE_ERROR for t in result.traces)
    assert "undefined_symbol" in result.build.log


def test_segfault_kills_only_its_workload_and_the_worker_is_replaced(bench: Bench) -> None:
    result = bench("segfault_on_medium.cpp", quick_config(keep_going=True))
    by_uuid = {w.uuid: w for w in result.workloads}
    assert by_uuid["medium-4096"].status == S.RUNTIME_ERROR
    assert "SIGSEGV" in by_uuid["medium-4096"].reason
    assert by_uuid["small-1000"].status == S.PASSED
    assert by_uuid["large-65536"].status == S.PASSED  # evaluated by a fresh worker


def test_after_a_crash_the_remaining_workloads_are_skipped_with_its_reason(bench: Bench) -> None:
    result = bench("segfault_on_medium.cpp")
    by_uuid = {w.uuid: w for w in result.workloads}
    assert by_uuid["small-1000"].status == S.PASSED
    assert by_uuid["medium-4096"].status == S.RUNTIME_ERROR
    skipped = by_uuid["large-65536"]
    assert skipped.status == S.RUNTIME_ERROR and skipped.timing is None
    assert (
        skipped.reason.startswith("skipped: workload medium-4096 ended RUNTIME_ERROR") and "SIGSEGV" in skipped.reason
    )


def test_a_hanging_candidate_costs_one_timeout_not_one_per_workload(bench: Bench) -> None:
    # The limit is also the baseline's, on every workload (the large one too): 10 s leave it room on a busy machine.
    result = bench("never_returns.cpp", quick_config(timeout_s=10.0))
    assert [w.status for w in result.workloads] == [S.TIMEOUT] * 3
    assert [w.reason.startswith("skipped:") for w in result.workloads] == [False, True, True]


def test_abort_is_a_runtime_error(bench: Bench) -> None:
    result = bench("aborts.cpp", only={"small-1000"})
    assert result.status == S.RUNTIME_ERROR
    assert "SIGABRT" in result.workloads[0].reason


def test_never_returning_kernel_times_out(bench: Bench) -> None:
    result = bench("never_returns.cpp", quick_config(timeout_s=3.0), only={"small-1000"})
    assert result.status == S.TIMEOUT
    assert "3 s" in result.workloads[0].reason


def test_sleeping_on_some_workloads_times_out_only_those(bench: Bench) -> None:
    # The large workload sleeps 600 s; 10 s leave the others room on a busy machine (they take well under 1 s).
    result = bench("sleeps_on_large.cpp", quick_config(timeout_s=10.0))
    statuses = {w.uuid: w.status for w in result.workloads}
    assert statuses == {"small-1000": S.PASSED, "medium-4096": S.PASSED, "large-65536": S.TIMEOUT}


def test_runaway_memory_is_stopped_by_the_worker_limit(bench: Bench) -> None:
    result = bench("runaway_memory.cpp", only={"small-1000"})
    assert result.status == S.RUNTIME_ERROR
    assert "SIGSEGV" in result.workloads[0].reason or "memory" in result.workloads[0].reason


def test_the_evaluator_survives_everything_and_still_passes_honest_code(bench: Bench) -> None:
    for filename in ("aborts.cpp", "segfault_on_medium.cpp", "honest.cpp"):
        result = bench(filename, only={"medium-4096"})
    assert result.status == S.PASSED
