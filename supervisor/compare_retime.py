"""The closing session of a comparison: every run's result timed again against the same incumbent, one after
another in one evaluator (one warm worker), in a shuffled order so that no arm is timed always early or late.

Each timing is the evaluator's paired timing (the result and the incumbent interleaved call by call), so every
figure of the table comes from one session on one machine state. The session opens with the incumbent timed
against itself (it must tie: the control) and, when the task's baseline is not the start, the incumbent timed
against the baseline (what the results' fraction of the baseline's performance is computed from).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from evoteam.gpu_bench.api import CandidateResult, EvaluationStatus, Solution
from evoteam.roles.tools.evaluation import EvaluationService
from evoteam.supervisor.compare_result import Control, FinalTiming

Announce = Callable[[str], None]


def final_timing(result: CandidateResult, factor: float | None) -> FinalTiming:
    """A result's figures; ``factor`` is the incumbent's speedup over the task's baseline."""
    passed = result.status == EvaluationStatus.PASSED
    speedup = result.summary.geomean_speedup if passed else None
    return FinalTiming(
        status=result.status.value,
        speedup=speedup,
        ci=result.summary.geomean_ci if passed else None,
        faster=result.summary.faster,
        total=result.summary.total,
        of_baseline=speedup * factor if speedup is not None and factor is not None else None,
    )


def closing_session(
    service: EvaluationService,
    incumbent: Solution | None,
    baseline_is_start: bool,
    results: Sequence[Solution],
    order_seed: int,
    announce: Announce = lambda line: None,
) -> tuple[Control | None, float | None, list[FinalTiming]]:
    """The control, the incumbent's speedup over the task's baseline, and each result's final timing (in the
    order given). ``incumbent`` None: the start failed, and results are timed against the task's baseline
    (``service``'s own)."""
    control = None
    factor: float | None = 1.0
    if incumbent is not None:
        tie = service.evaluate(incumbent, incumbent)
        speed = tie.summary.geomean_speedup if tie.status == EvaluationStatus.PASSED else None
        ci = tie.summary.geomean_ci if speed is not None else None
        control = Control(speedup=speed, ci=ci, ties=ci is not None and ci[0] <= 1.0 <= ci[1])
        announce(f"control: the start against itself {_speed(speed, ci)}")
        if not baseline_is_start:
            against = service.evaluate(incumbent)
            factor = against.summary.geomean_speedup if against.status == EvaluationStatus.PASSED else None
            announce(f"the start over the task's baseline: {_speed(factor, against.summary.geomean_ci)}")
    order = list(range(len(results)))
    random.Random(order_seed).shuffle(order)
    timings: dict[int, FinalTiming] = {}
    for done, i in enumerate(order, 1):
        solution = results[i]
        result = service.evaluate(solution, incumbent) if incumbent is not None else service.evaluate(solution)
        timings[i] = final_timing(result, factor)
        announce(f"final timing {done}/{len(order)}: {_speed(timings[i].speedup, timings[i].ci)}")
    return control, factor, [timings[i] for i in range(len(results))]


def _speed(speed: float | None, ci: tuple[float, float] | None) -> str:
    if speed is None:
        return "failed"
    return f"{speed:.3f}x" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci is not None else "")
