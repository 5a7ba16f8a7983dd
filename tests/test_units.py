"""Pure pieces: the tolerance rule, noise, summary maths, the build cache and its keys."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import kernel_solution
from evoteam.gpu_bench.build.builder import build, build_key
from evoteam.gpu_bench.result import WorkloadResult, geomean, summarize
from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.gpu_bench.timing.cpu import time_call
from evoteam.gpu_bench.timing.flush import operand_flusher
from evoteam.gpu_bench.timing.statistics import TimingConfig, relative_noise
from evoteam.gpu_bench.verify.compare import Errors, Mismatch, compare


@pytest.mark.unit
def test_an_element_fails_only_if_both_absolute_and_relative_error_are_too_large() -> None:
    ref = torch.tensor([100.0, 0.001])
    # 100 -> 100.5: abs 0.5 > atol but rel 0.005 < rtol: passes. 0.001 -> 0.005: rel 4 > rtol but abs < atol.
    assert isinstance(compare("o", torch.tensor([100.5, 0.005]), ref, atol=0.01, rtol=0.01), Errors)
    failed = compare("o", torch.tensor([102.0, 0.001]), ref, atol=0.01, rtol=0.01)
    assert isinstance(failed, Mismatch) and failed.status == EvaluationStatus.INCORRECT_NUMERICAL
    assert "1 of 2" in failed.reason and failed.max_absolute_error == pytest.approx(2.0)


@pytest.mark.unit
def test_the_allclose_rule_bounds_the_error_by_atol_plus_rtol_times_the_reference() -> None:
    ref = torch.tensor([1.0, 1.0])
    near = torch.tensor([1.00015, 1.0])  # 1.5e-4 over both 1e-4 bounds, under their sum 2e-4
    assert isinstance(compare("o", near, ref, 1e-4, 1e-4), Mismatch)
    assert isinstance(compare("o", near, ref, 1e-4, 1e-4, "allclose"), Errors)
    assert torch.allclose(near, ref, atol=1e-4, rtol=1e-4)  # KernelBench's check agrees
    far = torch.tensor([1.00025, 1.0])
    failed = compare("o", far, ref, 1e-4, 1e-4, "allclose")
    assert isinstance(failed, Mismatch) and not torch.allclose(far, ref, atol=1e-4, rtol=1e-4)
    assert "outside atol + rtol * |expected| (atol=0.0001, rtol=0.0001)" in failed.reason


@pytest.mark.unit
def test_a_matched_ratio_passes_an_output_with_few_elements_outside_tolerance() -> None:
    ref = torch.zeros(100)
    out = ref.clone()
    out[:4] = 1.0  # 96% of the elements within tolerance
    assert isinstance(compare("o", out, ref, 1e-2, 1e-2), Mismatch)
    assert isinstance(compare("o", out, ref, 1e-2, 1e-2, matched_ratio=0.95), Errors)
    out[:6] = 1.0  # 94%
    failed = compare("o", out, ref, 1e-2, 1e-2, matched_ratio=0.95)
    assert isinstance(failed, Mismatch) and "94.00% matched where 95% must" in failed.reason


@pytest.mark.unit
def test_nan_where_the_reference_is_finite_fails_but_matching_nan_passes() -> None:
    nan = float("nan")
    bad = compare("o", torch.tensor([1.0, nan]), torch.tensor([1.0, 2.0]), 1e-2, 1e-2)
    assert isinstance(bad, Mismatch) and "non-finite" in bad.reason
    assert isinstance(compare("o", torch.tensor([1.0, nan]), torch.tensor([1.0, nan]), 1e-2, 1e-2), Errors)
    assert isinstance(compare("o", torch.tensor([1.0]), torch.tensor([1.0, 2.0]), 1e-2, 1e-2), Mismatch)


@pytest.mark.unit
def test_relative_noise_of_constant_samples_is_zero_and_of_noisy_samples_is_positive() -> None:
    assert relative_noise([1.0] * 20) == 0.0
    assert relative_noise([1.0, 2.0] * 10) > 0.1
    assert math.isinf(relative_noise([1.0, 2.0]))


@pytest.mark.unit
def test_timing_stops_early_once_the_median_is_stable() -> None:
    ticks = iter(range(0, 10**12, 1000))  # a fake clock: every reading is 1 µs later

    def clock() -> int:
        return next(ticks)

    stats = time_call(lambda: None, TimingConfig(flush_cache=False, warmup_s=0.0), clock=clock)
    assert stats.n == 10 and stats.median_ms == pytest.approx(0.001)
    assert stats.noise == 0.0 and stats.warmup_calls == 3


@pytest.mark.unit
def test_summary_geomean_mean_faster_and_worst() -> None:
    ok = EvaluationStatus.PASSED
    results = [WorkloadResult(uuid=u, axes={}, status=ok, speedup=s) for u, s in (("a", 2.0), ("b", 0.5), ("c", 4.0))]
    s = summarize(results)
    assert s.geomean_speedup == pytest.approx(geomean([2.0, 0.5, 4.0])) == pytest.approx(4.0 ** (1 / 3) * 1.0)
    assert s.mean_speedup == pytest.approx(6.5 / 3)
    assert (s.faster, s.total, s.passed) == (2, 3, 3)
    assert s.worst is not None and s.worst.uuid == "b"
    failed = summarize([*results, WorkloadResult(uuid="d", axes={}, status=EvaluationStatus.TIMEOUT, reason="slow")])
    assert failed.geomean_speedup is None and failed.mean_speedup is None
    assert failed.worst is not None and failed.worst.status == EvaluationStatus.TIMEOUT
    # KernelBench's fast_p: passed with a speedup over p, as a share of all four workloads
    assert failed.fast_p == {"fast_0": 0.75, "fast_1": 0.5, "fast_1.5": 0.5, "fast_2": 0.25}


@pytest.mark.unit
def test_torchs_own_dynamo_wrapper_is_not_tampering_but_a_lookalike_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from evoteam.gpu_bench.verify import integrity

    before = integrity.snapshot()
    original = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(original))  # what importing torch._dynamo does
    assert integrity.tampered(before) == []

    def lookalike(seed: int) -> object:
        return original(0)

    lookalike.__wrapped__ = original  # type: ignore[attr-defined]
    monkeypatch.setattr(torch, "manual_seed", lookalike)
    assert integrity.tampered(before) == ["torch.manual_seed"]
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(lookalike))  # torch's wrapper of another function
    assert integrity.tampered(before) == ["torch.manual_seed"]
    disguised = torch._disable_dynamo(lookalike)
    disguised.__wrapped__ = original  # the attribute says the original; the wrapper still calls the lookalike
    monkeypatch.setattr(torch, "manual_seed", disguised)
    assert integrity.tampered(before) == ["torch.manual_seed"]


@pytest.mark.integration
def test_a_repeated_build_is_a_cache_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    solution = kernel_solution("honest.cpp")
    first = build(solution, tmp_path)

    def no_compiler(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a cache hit ran a process: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    again = build(solution.model_copy(update={"name": "renamed"}), tmp_path)
    assert first.ok and not first.cached
    assert again.ok and again.cached and again.artifact == first.artifact
    assert again.diagnostics == first.diagnostics and again.log == first.log


@pytest.mark.integration
def test_flags_and_sources_change_the_build_key() -> None:
    solution = kernel_solution("honest.cpp")
    other_flags = solution.model_copy(
        update={"spec": solution.spec.model_copy(update={"compile_flags": ["-O3", "-march=native"]})}
    )
    source = solution.sources[0].model_copy(update={"content": solution.sources[0].content + "\n"})
    other_source = solution.model_copy(update={"sources": [source]})
    keys = {build_key(solution), build_key(other_flags), build_key(other_source)}
    assert len(keys) == 3


@pytest.mark.integration
def test_a_compile_error_keeps_the_compiler_log_and_caches_nothing(tmp_path: Path) -> None:
    result = build(kernel_solution("compile_error.cpp"), tmp_path)
    assert not result.ok and "undefined_symbol" in result.log
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
def test_operand_flush_helper_builds_and_leaves_data_intact() -> None:
    data = torch.arange(100_000, dtype=torch.float32)
    before = data.clone()
    flush = operand_flusher([data, torch.empty(0)])
    assert flush is not None, "the clflush helper should build wherever g++ is"
    flush()
    assert torch.equal(data, before)


@pytest.mark.integration
def test_a_worker_that_cannot_start_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from evoteam.gpu_bench.runner import LocalRunner, WorkerStartError
    from evoteam.gpu_bench.worker import client

    monkeypatch.setattr(client, "worker_command", lambda: [sys.executable, "-c", "import sys; sys.exit(3)"])
    runner = LocalRunner()
    try:
        with pytest.raises(WorkerStartError, match="exited with code 3"):
            runner.run(None, [], kernel_solution("honest.cpp"), None, None)  # type: ignore[arg-type]
    finally:
        runner.close()
