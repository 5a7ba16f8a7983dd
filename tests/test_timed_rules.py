"""Rules of the timed phase (``worker/timed.py``): the memo check's verdict on one round of seen and unseen
calls (by the clock and by CPU time where it was read, so neither a busy machine that preempts calls nor a
CPU clock that counts a spinning thread pool in 4 ms ticks is taken for a kernel answering from a memo), which
kernel is exempt from it (the definition's own reference), and the round trip each side of a paired timing
subtracts."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.verify.reference import is_reference, reference_solution
from evoteam.gpu_bench.worker.timed import UNSEEN_FACTOR, _common, _MemoRound

pytestmark = pytest.mark.unit


def round_of(seen: list[tuple[float, float | None]], unseen: list[tuple[float, float | None]]) -> _MemoRound:
    sample = _MemoRound()
    for (seen_wall, seen_cpu), (new_wall, new_cpu) in zip(seen, unseen, strict=True):
        sample.add(True, seen_wall, seen_cpu)
        sample.add(False, new_wall, new_cpu)
    return sample


def test_preempted_unseen_calls_are_slow_by_the_clock_but_not_by_cpu_time() -> None:
    """Every unseen call lost two 4 ms scheduler slices; their CPU time is the seen calls'."""
    sample = round_of([(1.8, 1.7)] * 4, [(9.9, 1.75)] * 4)
    assert sample.ratio() < 1.1 < UNSEEN_FACTOR


def test_a_pool_thread_counted_at_a_tick_is_not_taken_for_work() -> None:
    """An honest torch reference with two threads (CI, 2026-12-05): the clock says 2 ms for every call, the
    process's CPU clock 2 or 6 ms, as the spinning pool thread's time arrived in 4 ms ticks."""
    seen = [(2.74, 6.75), (1.88, 1.89), (2.07, 2.07), (1.91, 1.91)]
    unseen = [(2.12, 6.12), (1.95, 5.96), (2.23, 6.2), (1.86, 5.87)]
    sample = round_of(seen, unseen)
    assert sample.ratio() < 1.1 < UNSEEN_FACTOR


def test_a_memo_is_faster_on_what_it_has_seen_by_the_clock_and_by_cpu_time() -> None:
    sample = round_of([(0.010, 0.011)] * 4, [(0.044, 0.050)] * 4)  # the clock: 4.4x; the work: 4.5x
    assert sample.ratio() == pytest.approx(4.4) and sample.ratio() > UNSEEN_FACTOR


def test_a_memo_whose_lookup_costs_a_third_of_its_work_is_caught() -> None:
    """``memo_python.py`` in its Python host (2026-12-07), a round it passed at 3x: the clock 2.8x, CPU 3.4x."""
    seen = [(0.1249, 0.0902), (0.1424, 0.0951), (0.2260, 0.1203), (0.1310, 0.0931)]
    unseen = [(0.3481, 0.3086), (0.3669, 0.3121), (0.3690, 0.3150), (0.3520, 0.3102)]
    assert 2.7 < round_of(seen, unseen).ratio() < 2.9
    assert round_of(seen, unseen).ratio() > UNSEEN_FACTOR


def test_without_cpu_time_the_clock_judges() -> None:
    """On a GPU, or when one reading failed, the fastest calls by the clock."""
    sample = round_of([(1.0, None), (0.9, 0.9)] * 2, [(4.0, 1.0), (3.6, 0.9)] * 2)
    assert sample.cpu is None and sample.ratio() == pytest.approx(4.0)
    assert round_of([(0.0, 0.0)], [(1.0, 1.0)]).ratio() == float("inf")


def test_two_hosted_sides_subtract_the_same_round_trip() -> None:
    """Two measurements of one mechanism differ a little; subtracting each its own would favour one side."""
    assert _common(0.021, 0.018) == (0.018, 0.018)
    assert _common(0.0, 0.02) == (0.0, 0.02)  # the incumbent runs in the worker: only the candidate pays one
    assert _common(0.0, 0.0) == (0.0, 0.0)


def test_only_the_definitions_own_reference_is_trusted_past_the_memo_check() -> None:
    """The task's ground truth is not a candidate: a loaded machine's clock must not reject it (a KernelBench
    softmax reference was once REJECTED at 62.5x, failing the task). A copy with any change is a candidate."""
    definition = load_definition(Path(__file__).parent / "data" / "scale_add.json")
    reference = reference_solution(definition)
    assert is_reference(reference, definition)
    changed = reference.model_copy(
        update={"sources": [reference.sources[0].model_copy(update={"content": definition.reference + "\n# x\n"})]}
    )
    assert not is_reference(changed, definition)
