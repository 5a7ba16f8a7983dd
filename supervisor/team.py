"""A team: its roles, how they coordinate (protocol), the constraints in force and each role's budget share.

The three modes start from ``initial_team``: ``single`` (one Optimizer), ``fixed`` (Optimizer, Debugger,
Profiling Scientist, Knowledge Integrator, never changed) and ``evolving`` (starts as ``fixed``; the supervisor
reorganizes it after each round).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoteam.gpu_bench.api import Constraints

Protocol = Literal["sequential", "parallel"]
"""sequential: a pipeline in role order on one workspace, each role seeing what the ones before it did (e.g.
Profiling Scientist → Optimizer → Disciplinarian review); parallel: every role at once on its own copy."""
TeamMode = Literal["single", "fixed", "evolving"]
FIXED_ROLES = ("Profiling Scientist", "Optimizer", "Debugger", "Knowledge Integrator")


class Team(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roles: list[str] = Field(min_length=1)
    protocol: Protocol = "sequential"
    constraints: Constraints = Field(default_factory=Constraints)
    """Set by the supervisor on top of the task's own (``require = ["wgmma.mma_async"]`` after a downgrade)."""
    budget_shares: dict[str, float] = Field(default_factory=dict)
    """Overrides of the roles' own shares (``RoleSpec.budget_share``), for moving budget between roles."""
    briefs: dict[str, str] = Field(default_factory=dict)
    """The supervisor's brief or sub-task for a role (``the workloads with batch_size <= 16``), added to its
    round brief until changed."""
    starts: dict[str, str] = Field(default_factory=dict)
    """The candidate a role starts the next round from instead of the best (a failing one for a Debugger);
    for one round."""
    reprofile: bool = False
    """Profile the round's start before its agents play, for the next round only: the profile goes into every
    member's brief and the knowledge store."""
    require_citations: bool = False
    """Knowledge policy: a strategy or failed attempt must name an evaluated candidate (which gives it its
    standing) or is refused."""

    @model_validator(mode="after")
    def _check(self) -> Team:
        if len(set(self.roles)) != len(self.roles):
            raise ValueError(f"a role is listed twice in {self.roles}")
        for what, by_role in (("budget shares", self.budget_shares), ("briefs", self.briefs), ("starts", self.starts)):
            unknown = sorted(set(by_role) - set(self.roles))
            if unknown:
                raise ValueError(f"{what} for roles not in the team: {unknown}")
        if any(v <= 0 for v in self.budget_shares.values()):
            raise ValueError("budget shares must be positive")
        return self


def initial_team(mode: TeamMode) -> Team:
    if mode == "single":
        return Team(roles=["Optimizer"])
    return Team(roles=list(FIXED_ROLES))
