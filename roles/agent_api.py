"""What an agent is given and what it hands back: the seam between the supervisor and every backend.

``Agent`` has one method. The tool-loop agent (anthropic, scripted), the claude-code agent and the offline
tuner all implement it, so the supervisor runs any team without knowing which backend its members use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import Solution
from evoteam.roles.budget import Budget
from evoteam.roles.llm import Usage
from evoteam.roles.prompt import TaskPrompt
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.base import Toolbox
from evoteam.roles.workspace import Workspace


class Assignment(BaseModel):
    """One agent's job for one round."""

    model_config = ConfigDict(extra="forbid")
    role: RoleSpec
    agent_id: str
    kernel: str
    round: int = 0
    rounds: int = 0
    """The run's rounds (0: not said)."""
    brief: str = ""
    """The supervisor's instructions for this round (constraints, focus, what failed before)."""
    max_turns: int = Field(default=30, gt=0)


class Submission(BaseModel):
    model_config = ConfigDict(extra="forbid")
    solution: Solution
    rationale: str
    role: str
    agent_id: str
    evaluation: dict[str, object] | None = None
    """The summary of the evaluation made at submission (status, speedups), when the tool ran one."""


StopReason = Literal["end_turn", "budget", "max_turns", "llm_error", "cancelled"]


class AgentReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    agent_id: str
    submissions: list[Submission] = []
    usage: Usage = Field(default_factory=Usage)
    turns: int = 0
    stop: StopReason
    error: str | None = None
    final_text: str = ""


@dataclass
class AgentContext:
    """Everything an agent may touch: its workspace, its tools (already narrowed to its role), the budget (in a
    run, its role's share of the round: ``roles.budget.RoleShare``), and where its submissions land (the submit
    tool appends to ``submissions``). ``task`` holds the prompt variables of the kernel
    (``evoteam.roles.prompt.task_prompt``); agents that prompt a model need it."""

    assignment: Assignment
    workspace: Workspace
    toolbox: Toolbox
    budget: Budget
    submissions: list[Submission]
    task: TaskPrompt | None = None
    evaluations: int | None = None
    """The ``evaluate`` calls this agent may make (its role's share of the run's evaluation budget, when the
    run has one; a call over it is refused); None: no limit."""


class Agent(Protocol):
    def run(self, context: AgentContext) -> AgentReport: ...
