"""The plan of an ``evoteam compare`` experiment: its arms, the interleaved order of their runs, and each run's
configuration (the same budget, its own seed, its own knowledge store).

An arm is a team mode under a name; the same mode twice is two arms (``fixed``, ``fixed#2``), which is how the
comparison checks itself: two arms of one configuration must come out alike. Seed ``s`` runs every arm once,
starting at arm ``s`` (mod the number of arms), so no arm always runs first or last while the machine warms
up or drifts. Every run reads and writes its own knowledge store, either empty or seeded from one snapshot of
the kernel's store taken when the experiment starts, so no run learns from another run of the experiment.
"""

from __future__ import annotations

import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.budget import Price
from evoteam.supervisor.config import DEFAULT_MAX_TOKENS, LlmChoice, RunConfig, new_run_id, state_dir
from evoteam.supervisor.team import TeamMode

KnowledgeStart = Literal["empty", "snapshot"]
TEAM_MODES: tuple[str, ...] = get_args(TeamMode)


class Arm(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    """What the table calls it: the mode, with ``#2``, ``#3``... for the same mode again."""
    mode: TeamMode


class Settings(BaseModel):
    """What every run of the experiment shares."""

    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(ge=1)
    budget: int = Field(ge=0)
    """Tokens of each run."""
    evaluation_budget: int | None = Field(default=None, ge=1)
    """The agents' evaluations of each run (offline, the budget that makes runs the same size)."""
    llm: LlmChoice = "auto"
    model: str | None = None
    runner: str = "local"
    seed: int = 0
    """The first run seed; seed index ``s`` runs with ``seed + s``."""
    knowledge: KnowledgeStart = "empty"
    max_turns: int | None = Field(default=None, gt=0)
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    prices: dict[str, Price] = Field(default_factory=dict)
    unsafe_no_sandbox: bool = False


class PlanError(ValueError):
    """Arms or seeds that make no experiment."""


def parse_arms(text: str) -> list[Arm]:
    """``single,fixed,evolving`` → its arms, in that order; the same mode again is a new arm ``mode#k``."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise PlanError(f"--arms names no arm; give some of {', '.join(TEAM_MODES)}, comma-separated")
    unknown = [n for n in names if n not in TEAM_MODES]
    if unknown:
        raise PlanError(f"unknown arm {unknown[0]!r}; arms are team modes: {', '.join(TEAM_MODES)}")
    arms: list[Arm] = []
    for name in names:
        again = sum(a.mode == name for a in arms)
        arms.append(Arm(name=name if again == 0 else f"{name}#{again + 1}", mode=name))
    return arms


def interleave(arms: list[Arm], seeds: int) -> list[tuple[int, Arm]]:
    """The runs in the order they run: seed by seed, each seed every arm once, starting one arm later than
    the seed before."""
    if seeds < 1:
        raise PlanError(f"--seeds must be at least 1, got {seeds}")
    return [(s, arms[(s + k) % len(arms)]) for s in range(seeds) for k in range(len(arms))]


def experiment_id(now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"compare-{stamp}-{secrets.token_hex(2)}"


def knowledge_key(experiment: str, task: str, arm: Arm, seed: int) -> str:
    """The folder name of one run's knowledge store under ``.evoteam/knowledge/``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{task}.{experiment}.{arm.name}.{seed}")
    return safe.replace("#", "-")


def run_config(settings: Settings, experiment: str, task: str, config_path: Path, arm: Arm, seed: int) -> RunConfig:
    """The configuration of the run of ``arm`` with seed index ``seed``."""
    evaluations = settings.evaluation_budget
    return RunConfig(
        run=new_run_id(f"{task}-{arm.name.replace('#', '-')}"),
        kernel=task,
        config=str(config_path),
        mode=arm.mode,
        rounds=settings.rounds,
        budget=settings.budget,
        llm=settings.llm,
        runner=settings.runner,
        model=settings.model,
        # With an evaluation budget, a role's share of it is the limit, not a count per agent.
        evaluations_per_agent=evaluations
        if evaluations is not None
        else RunConfig.model_fields["evaluations_per_agent"].default,
        evaluation_budget=evaluations,
        seed=settings.seed + seed,
        knowledge=knowledge_key(experiment, task, arm, seed),
        max_turns=settings.max_turns,
        max_tokens=settings.max_tokens,
        prices=settings.prices,
        unsafe_no_sandbox=settings.unsafe_no_sandbox,
    )


def snapshot_knowledge(repo_root: Path, kernel: str, experiment: str) -> Path | None:
    """A frozen copy of the kernel's knowledge store, taken now (None when the kernel has none)."""
    source = repo_root / ".evoteam" / "knowledge" / kernel
    if not source.is_dir():
        return None
    target = state_dir(repo_root) / "compare" / experiment / "knowledge" / kernel
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def seed_knowledge(repo_root: Path, snapshot: Path | None, key: str) -> Path:
    """The run's own store ``.evoteam/knowledge/<key>/``: a copy of ``snapshot``, or empty."""
    folder = repo_root / ".evoteam" / "knowledge" / key
    if folder.exists():
        shutil.rmtree(folder)
    if snapshot is not None:
        shutil.copytree(snapshot, folder)
    else:
        folder.mkdir(parents=True)
    return folder
