"""After a round's agents: each of its candidates evaluated, committed to its round branch, and the best moved.

Each step is journaled as it is done (``evaluated``, ``committed``, ``best``) and skipped when the journal says
it was (a resumed round): a candidate is evaluated once and committed once. A candidate a review vetoed is
committed, marked vetoed and never best.
"""

from __future__ import annotations

from evoteam.gpu_bench.api import CandidateResult, EvaluationStatus, Solution, downgrades, lost_classes
from evoteam.roles.tools.candidate import kernel_files
from evoteam.roles.tools.evaluation import EvaluationCache
from evoteam.supervisor.events import BestMoved, Committed, Evaluated, Retimed, StartEvaluated
from evoteam.supervisor.records import CandidateRecord, WorkloadOutcome
from evoteam.supervisor.reporting import evaluated_line
from evoteam.supervisor.services import RunContext
from evoteam.supervisor.state import START_ID, Candidate, RunState


def evaluate_and_commit(run: RunContext, number: int, cache: EvaluationCache) -> None:
    state = run.log.state
    best = _best_classes(state)
    for candidate in state.round_candidates(number):
        solution = Solution.model_validate(candidate.solution)
        if candidate.record is None:
            result = cache.evaluate(solution)
            record = candidate_record(candidate, result)
            if result.build.ok and result.build.ptx is not None:  # compiled facts: what the compiler emitted
                record.dropped_constructs = lost_classes(best, record.instruction_classes)
                record.downgrades = downgrades(best, record.instruction_classes)
            known = run.knowledge.is_known_failure(candidate.rationale)
            record.known_failure = known.id if known is not None and record.status != EvaluationStatus.PASSED else None
            record.vetoed = state.veto_of(candidate) is not None
            evaluated = Evaluated(record=record)
            run.log.record(evaluated)
            run.reporter.activity(evaluated_line(evaluated))
        if candidate.sha is None:
            sha = _commit(run, candidate, solution)
            run.log.record(Committed(id=candidate.id, sha=sha))
    _retime_contenders(run, state, number, cache)
    _move_best(run, state)


def ensure_start(run: RunContext) -> Solution | None:
    """The run's incumbent: the start kernel (the base's files), evaluated once against the task's baseline and
    journaled (``start``). Candidates are timed against it; a start that fails its own evaluation cannot be
    one, and candidates are then timed against the task's baseline (None)."""
    state = run.log.state
    if state.start is None or state.start_solution is None:
        solution = start_solution(run)
        assert state.team is not None
        result = run.services.evaluations(state.team, None).evaluate(solution)
        record = result_record(START_ID, 0, "start", "the kernel the run started from", result)
        run.log.record(StartEvaluated(solution=solution.model_dump(mode="json"), record=record))
        run.reporter.activity(f"start: {record.speed()} over the task's baseline ({record.status.value})")
    assert state.start is not None and state.start_solution is not None
    if state.start.status != EvaluationStatus.PASSED:
        return None
    return Solution.model_validate(state.start_solution)


def start_solution(run: RunContext) -> Solution:
    """The task's solution with the base commit's contents (the files as the run found them)."""
    state = run.log.state
    assert state.base is not None
    task = run.task
    current = task.source_solution(task.load_definition())
    sources = [
        source.model_copy(update={"content": run.store.read(state.base, path).decode("utf-8", "replace")})
        for source, path in zip(current.sources, run.paths(), strict=True)
    ]
    return current.model_copy(update={"sources": sources})


def significant(record: CandidateRecord, min_effect: float) -> bool:
    """Faster than the start beyond doubt: the lower end of the geomean's 95% interval above 1 + ``min_effect``
    (the geomean itself where no interval was measured)."""
    if record.geomean_speedup is None:
        return False
    low = record.geomean_ci[0] if record.geomean_ci is not None else record.geomean_speedup
    return low > 1.0 + min_effect


def _retime_contenders(run: RunContext, state: RunState, number: int, cache: EvaluationCache) -> None:
    """The round's best few contenders (significant, faster than the best so far, not yet re-timed) evaluated
    again against the start; each new record is journaled (``retimed``) and is what the best is named on.
    Selecting the fastest of noisy measurements favours the lucky one: a second, independent measurement
    does not."""
    assert state.config is not None
    floor = state.best_speedup if state.best is not None and state.best_speedup is not None else 0.0
    contenders = sorted(
        (
            c
            for c in state.round_candidates(number)
            if _eligible(c, state.config.min_effect)
            and c.record is not None
            and c.record.retimed_from is None
            and (c.record.geomean_speedup or 0.0) > floor
        ),
        key=lambda c: -(c.record.geomean_speedup or 0.0) if c.record is not None else 0.0,
    )
    for candidate in contenders[: state.config.retime_top]:
        first = candidate.record
        assert first is not None
        again = candidate_record(candidate, cache.retime(Solution.model_validate(candidate.solution)))
        keep = ("vetoed", "known_failure", "dropped_constructs", "downgrades", "violations")
        record = again.model_copy(
            update={"retimed_from": first.geomean_speedup, **{name: getattr(first, name) for name in keep}}
        )
        run.log.record(Retimed(record=record))
        run.reporter.activity(f"re-timed {candidate.id}: {record.speed()} (first measurement {first.speed()})")


def _standing(candidate: Candidate) -> tuple[CandidateRecord, float] | None:
    """The candidate's record and geomean speedup when it has one, is committed and is not vetoed."""
    record = candidate.record
    if record is None or record.geomean_speedup is None or record.vetoed or candidate.sha is None:
        return None
    return record, record.geomean_speedup


def _eligible(candidate: Candidate, min_effect: float) -> bool:
    """Standing, and significantly faster than the start on its measurement."""
    standing = _standing(candidate)
    return standing is not None and significant(standing[0], min_effect)


def _confirmed(candidate: Candidate, min_effect: float) -> bool:
    """Standing, re-timed (it was significant on its first measurement, or it would not have been), passing,
    and its re-timed geomean, an independent estimate, still above 1 + ``min_effect``."""
    standing = _standing(candidate)
    if standing is None:
        return False
    record, speedup = standing
    return record.retimed_from is not None and record.status == EvaluationStatus.PASSED and speedup > 1.0 + min_effect


def _move_best(run: RunContext, state: RunState) -> None:
    """The committed, passing, not vetoed candidate significantly faster than the start with the highest geomean
    becomes the run's best (its branch, then the journal); without one the run has no best. With re-timing on
    (``RunConfig.retime_top``), only a re-timed candidate whose re-timed geomean confirms the effect, ranked on
    its re-timed figures."""
    assert state.config is not None
    effect = state.config.min_effect
    retimed = state.config.retime_top > 0
    ranked = [
        (c.record.geomean_speedup, c)
        for c in state.candidates.values()
        if c.record is not None
        and c.record.geomean_speedup is not None
        and (_confirmed(c, effect) if retimed else _eligible(c, effect))
    ]
    if not ranked:
        return
    speedup, top = max(ranked, key=lambda pair: pair[0])
    if top.id != state.best:
        assert top.sha is not None
        run.store.set_best(top.sha)
        run.log.record(BestMoved(id=top.id, sha=top.sha, speedup=speedup))


def _best_classes(state: RunState) -> list[str]:
    """The instruction classes of the best candidate's generated code (the start's before there is a best):
    what a candidate must not fall behind."""
    record = state.candidates[state.best].record if state.best is not None else state.start
    return list(record.instruction_classes) if record is not None else []


def _commit(run: RunContext, candidate: Candidate, solution: Solution) -> str:
    record = candidate.record
    assert record is not None
    speed = f"{record.geomean_speedup:.3f}x" if record.geomean_speedup is not None else "-"
    body = "\n".join(
        [
            f"Rationale: {candidate.rationale}",
            f"Status: {record.status.value}" + (" (vetoed)" if record.vetoed else ""),
            f"Geomean speedup: {speed}; faster on {record.faster}/{record.total} workloads",
            f"Agent: {candidate.agent}",
            *(f"Violation: {v}" for v in record.violations),
        ]
    )
    trailers = {"Evoteam-Role": candidate.role, "Evoteam-Status": record.status.value, "Evoteam-Speedup": speed}
    subject = f"{candidate.role}: {candidate.rationale}"
    return run.store.commit_candidate(candidate.round, candidate.id, _files(run, solution), subject, body, trailers)


def _files(run: RunContext, solution: Solution) -> dict[str, bytes]:
    """The solution's sources as repository paths: its entry source is the task's source file."""
    paths = run.paths()
    names = dict(zip(kernel_files(run.task), paths, strict=True))
    files: dict[str, bytes] = {}
    for index, source in enumerate(solution.sources):
        path = paths[0] if index == 0 else names.get(source.path)
        if path is not None:
            files[path] = source.content.encode("utf-8")
    return files


def candidate_record(candidate: Candidate, result: CandidateResult) -> CandidateRecord:
    """What the supervisor keeps of a candidate's evaluation."""
    return result_record(candidate.id, candidate.round, candidate.role, candidate.rationale, result)


def result_record(cid: str, round_number: int, role: str, rationale: str, result: CandidateResult) -> CandidateRecord:
    """What the supervisor keeps of an evaluation."""
    passed = result.status == EvaluationStatus.PASSED
    return CandidateRecord(
        id=cid,
        round=round_number,
        role=role,
        status=result.status,
        rationale=rationale,
        geomean_speedup=result.summary.geomean_speedup if passed else None,
        geomean_ci=result.summary.geomean_ci if passed else None,
        faster=result.summary.faster,
        total=result.summary.total,
        violations=list(result.violations),
        instruction_classes=list(result.build.instruction_classes),
        registers=max((k.registers for k in result.resources), default=None),
        spill_bytes=sum(k.spill_stores + k.spill_loads for k in result.resources),
        workloads=[
            WorkloadOutcome(
                uuid=w.uuid,
                status=w.status,
                axes=dict(w.axes),
                speedup=w.speedup if w.status == EvaluationStatus.PASSED else None,
                ci=w.ci if w.status == EvaluationStatus.PASSED else None,
                flags=list(w.flags),
                latency_ms=w.timing.median_ms if w.timing is not None else None,
                reference_latency_ms=w.baseline_timing.median_ms if w.baseline_timing is not None else None,
                reason=(w.reason.strip().splitlines() or [""])[0][:200],
            )
            for w in result.workloads
        ],
    )
