"""``RoleSpec``: what a role is (mission template, allowed tools, model, share of the budget)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoteam.roles.prompt import template_variables
from evoteam.roles.tools.base import TOOL_NAMES


class RoleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    mission: str = Field(min_length=1)
    """A prompt template (``string.Template`` syntax, ``$kernel`` etc.); every variable must be known
    (``evoteam.roles.prompt.KNOWN_VARIABLES``)."""
    tools: list[str]
    """Names from ``TOOL_NAMES``, each once."""
    model: str | None = None
    """None: the run's default model."""
    budget_share: float = Field(default=1.0, gt=0)
    """Relative weight when a round's budget is split between roles."""
    can_veto: bool = False
    """A veto from this role withdraws the candidate it reviews (Disciplinarian)."""

    @model_validator(mode="after")
    def _check(self) -> RoleSpec:
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown:
            raise ValueError(f"role {self.name!r}: unknown tool(s) {unknown}; tools: {', '.join(TOOL_NAMES)}")
        if len(set(self.tools)) != len(self.tools):
            raise ValueError(f"role {self.name!r}: a tool is listed twice in {self.tools}")
        template_variables(self.mission, f"mission of role {self.name!r}")
        return self
