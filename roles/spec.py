"""``RoleSpec``: what a role is (mission template, allowed tools, model, share of the budget)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RoleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    mission: str = Field(min_length=1)
    """A prompt template (``string.Template`` syntax, ``$kernel`` etc.); every variable must be known."""
    tools: list[str]
    model: str | None = None
    """None: the run's default model."""
    budget_share: float = Field(default=1.0, gt=0)
    """Relative weight when a round's budget is split between roles."""
    can_veto: bool = False
    """A veto from this role withdraws the candidate it reviews (Disciplinarian)."""
