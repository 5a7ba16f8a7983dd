"""Signals computed from the rounds so far (stagnation, and a parallel round's new best); each names its evidence
(candidate ids, roles and numbers).

The signals are facts, not decisions: ``rules.decide`` (offline) or the supervisor model turns them into a
``SupervisorDecision``. Thresholds live in ``SignalConfig`` so tests and users can set them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import EvaluationStatus
from evoteam.supervisor.records import CandidateRecord, RoundRecord

SignalName = Literal[
    "plateau",
    "regression",
    "compile_failure_loop",
    "correctness_failure_loop",
    "missing_profile_evidence",
    "design_downgrade",
    "repeated_known_failure",
    "budget_burn_without_candidates",
    "idle_role",
    "new_best",
]

_CORRECTNESS = {
    EvaluationStatus.INCORRECT_NUMERICAL,
    EvaluationStatus.INCORRECT_SHAPE,
    EvaluationStatus.INCORRECT_DTYPE,
}


class SignalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plateau_rounds: int = Field(default=2, ge=1)
    """No new best over this many rounds → plateau."""
    min_gain: float = Field(default=0.02, ge=0)
    """A best counts as new only if it beats the old one by this fraction."""
    failure_rounds: int = Field(default=2, ge=1)
    """Rounds in a row whose candidates all failed the same way → a failure loop."""
    burn_tokens: int = Field(default=1, ge=0)
    """A round that spent at least this many tokens and submitted nothing → budget burn."""
    idle_rounds: int = Field(default=2, ge=1)
    """A role idle in this many rounds in a row → idle role."""


class Signal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: SignalName
    summary: str
    candidates: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    """The roles it is about (``idle_role``)."""
    numbers: dict[str, float] = Field(default_factory=dict)


def signal_id(signal: Signal) -> str:
    """The evidence id a decision cites the signal by."""
    return f"signal:{signal.name}"


def _scoring(record: RoundRecord, geomean: float) -> list[str]:
    """The candidates of the round whose geomean is ``geomean`` (its best, as ``RoundRecord.best`` found it)."""
    return [c.id for c in record.candidates if c.geomean_speedup == geomean]


def _best_so_far(rounds: Sequence[RoundRecord]) -> list[float]:
    """The running best geomean after each round (1.0 before any candidate passed: the baseline)."""
    best, out = 1.0, []
    for r in rounds:
        value = r.best()
        if value is not None and value > best:
            best = value
        out.append(best)
    return out


def plateau(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    k = config.plateau_rounds
    if len(rounds) < k + 1:
        return None
    running = _best_so_far(rounds)
    before, now = running[-k - 1], running[-1]
    if now > before * (1 + config.min_gain):
        return None
    return Signal(
        name="plateau",
        summary=f"no gain over {k} rounds: best {now:.3f}x, {before:.3f}x {k} rounds ago",
        numbers={"best": now, "best_before": before, "rounds": float(k)},
    )


def regression(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """The last round's best is below the best of the round before (a step back, not a new best)."""
    if len(rounds) < 2:
        return None
    last, previous = rounds[-1].best(), max((r.best() or 0.0) for r in rounds[:-1])
    if last is None or previous <= 0 or last >= previous * (1 - config.min_gain):
        return None
    ids = _scoring(rounds[-1], last)
    return Signal(
        name="regression",
        summary=f"round {rounds[-1].round}'s best {last:.3f}x is below the earlier best {previous:.3f}x",
        candidates=ids,
        numbers={"last": last, "previous": previous},
    )


def _failure_loop(
    rounds: Sequence[RoundRecord], config: SignalConfig, statuses: set[EvaluationStatus], name: SignalName, what: str
) -> Signal | None:
    k = config.failure_rounds
    recent = list(rounds[-k:])
    if len(recent) < k or any(not r.candidates for r in recent):
        return None
    failing = [c for r in recent for c in r.candidates if c.status in statuses]
    if len(failing) != sum(len(r.candidates) for r in recent):
        return None
    return Signal(
        name=name,
        summary=f"every candidate of the last {k} rounds failed with {what} ({len(failing)} candidates)",
        candidates=[c.id for c in failing],
        numbers={"failures": float(len(failing)), "rounds": float(k)},
    )


def compile_failure_loop(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    return _failure_loop(rounds, config, {EvaluationStatus.COMPILE_ERROR}, "compile_failure_loop", "COMPILE_ERROR")


def correctness_failure_loop(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    return _failure_loop(rounds, config, _CORRECTNESS, "correctness_failure_loop", "wrong results")


def missing_profile_evidence(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """Candidates were tried over the last rounds, yet nobody measured where the time goes."""
    k = config.plateau_rounds
    recent = list(rounds[-k:])
    if len(recent) < k or any(r.profiled for r in recent) or not any(r.candidates for r in recent):
        return None
    return Signal(
        name="missing_profile_evidence",
        summary=f"no profile in the last {k} rounds while {sum(len(r.candidates) for r in recent)} candidates ran",
        numbers={"rounds": float(k)},
    )


def design_downgrade(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """A candidate of the last round fell behind the best's design in its compiled code (a lower tensor-core
    generation, an asynchronous copy lost) or broke a constraint."""
    if not rounds:
        return None
    bad: list[CandidateRecord] = [c for c in rounds[-1].candidates if c.dropped_constructs or c.violations]
    if not bad:
        return None
    dropped = sorted({d for c in bad for d in (c.downgrades or c.dropped_constructs)})
    violations = sorted({v for c in bad for v in c.violations})
    parts = ([f"dropped {', '.join(dropped)}"] if dropped else []) + (
        [f"violated {'; '.join(violations)}"] if violations else []
    )
    return Signal(
        name="design_downgrade",
        summary=f"{len(bad)} candidate(s) of round {rounds[-1].round} " + " and ".join(parts),
        candidates=[c.id for c in bad],
        numbers={"candidates": float(len(bad))},
    )


def repeated_known_failure(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """A candidate of the last round repeats an attempt the knowledge store records as failed."""
    if not rounds:
        return None
    repeats = [c for c in rounds[-1].candidates if c.known_failure]
    if not repeats:
        return None
    return Signal(
        name="repeated_known_failure",
        summary=f"{len(repeats)} candidate(s) of round {rounds[-1].round} repeat recorded failed attempts"
        + ("" if rounds[-1].knowledge_read else "; nobody read the knowledge store"),
        candidates=[c.id for c in repeats],
        numbers={"repeats": float(len(repeats))},
    )


def budget_burn_without_candidates(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    if not rounds:
        return None
    last = rounds[-1]
    if last.candidates or last.tokens < max(config.burn_tokens, 1):
        return None
    return Signal(
        name="budget_burn_without_candidates",
        summary=f"round {last.round} spent {last.tokens} tokens and submitted no candidate",
        numbers={"tokens": float(last.tokens)},
    )


def idle_role(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """Roles that added nothing (``RoundRecord.idle_roles``) in each of the last rounds: their share of the
    budget buys nothing."""
    k = config.idle_rounds
    recent = list(rounds[-k:])
    if len(recent) < k:
        return None
    idle = [role for role in recent[-1].idle_roles if all(role in r.idle_roles for r in recent)]
    if not idle:
        return None
    return Signal(
        name="idle_role",
        summary=f"{', '.join(idle)} added nothing in the last {k} rounds",
        roles=idle,
        numbers={"rounds": float(k)},
    )


def new_best(rounds: Sequence[RoundRecord], config: SignalConfig) -> Signal | None:
    """A parallel round (roles exploring side by side) beat the best before it by more than ``min_gain``: the
    design that won is the one to build on, in a pipeline."""
    if not rounds or rounds[-1].protocol != "parallel":
        return None
    running = _best_so_far(rounds)
    before = running[-2] if len(rounds) > 1 else 1.0
    last = rounds[-1].best()
    if last is None or last <= before * (1 + config.min_gain):
        return None
    ids = _scoring(rounds[-1], last)
    return Signal(
        name="new_best",
        summary=f"parallel round {rounds[-1].round} moved the best from {before:.3f}x to {last:.3f}x",
        candidates=ids,
        numbers={"best": last, "best_before": before},
    )


DETECTORS = (
    plateau,
    regression,
    compile_failure_loop,
    correctness_failure_loop,
    missing_profile_evidence,
    design_downgrade,
    repeated_known_failure,
    budget_burn_without_candidates,
    idle_role,
    new_best,
)


def signals(rounds: Sequence[RoundRecord], config: SignalConfig | None = None) -> list[Signal]:
    """Every signal that fires after the last of ``rounds``, in ``DETECTORS`` order."""
    config = config or SignalConfig()
    return [s for detect in DETECTORS if (s := detect(rounds, config)) is not None]
