"""What a run is given (``RunServices``) and what every step of a running run uses (``RunContext``).

Every side effect of a run goes through a field here: the journal and its state (``log``), the branches
(``store``), the knowledge store, the evaluations, the agents, the supervisor's model and the reporter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evoteam.gpu_bench.api import KernelTask, Solution
from evoteam.roles.builtin import builtin_roles
from evoteam.roles.knowledge import KnowledgeStore
from evoteam.roles.llm import LLM
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.evaluation import EvaluationCache
from evoteam.supervisor.agents import AgentFactory
from evoteam.supervisor.git_store import CandidateStore
from evoteam.supervisor.reporting import Reporter, SilentReporter
from evoteam.supervisor.run_log import RunLog
from evoteam.supervisor.team import Team

Evaluations = Callable[[Team, Solution | None], EvaluationCache]
"""The evaluation cache for a team's constraints against an incumbent (None: the task's baseline); one per
distinct pair, shared by every tool of the run."""


@dataclass
class RunServices:
    task: KernelTask
    evaluations: Evaluations
    agents: AgentFactory
    supervisor_llm: tuple[LLM, str] | None = None
    """With a model backend the supervisor is a model call; None: the offline rules decide."""
    roles: dict[str, RoleSpec] = field(default_factory=builtin_roles)
    build: str | None = None
    """How candidates are built, as the agents' prompt says it (the compiler's version line and flags; the
    real wiring asks the compiler once); None: the compiler's name and the flags, without running it."""
    reporter: Reporter = field(default_factory=SilentReporter)
    """Told when a round starts, after every round and at the end, and of each thing agents do."""


class RunFault:
    """Why the run must stop now (a model error no retry can fix), set once from any agent's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._message: str | None = None

    @property
    def message(self) -> str | None:
        with self._lock:
            return self._message

    def set(self, message: str) -> None:
        with self._lock:
            if self._message is None:
                self._message = message


@dataclass
class RunContext:
    """One running run: where it lives and the services its steps use."""

    run: str
    folder: Path
    """``.evoteam/runs/<run>/``: the journal, the cancel request, the rounds' workspaces."""
    services: RunServices
    log: RunLog
    store: CandidateStore
    knowledge: KnowledgeStore
    fault: RunFault = field(default_factory=RunFault)

    @property
    def task(self) -> KernelTask:
        return self.services.task

    @property
    def reporter(self) -> Reporter:
        return self.services.reporter

    def cancel_requested(self) -> bool:
        """``evoteam cancel RUN`` wrote its request file."""
        return (self.folder / "cancel").exists()

    def halted(self) -> bool:
        """Cancelled, or a fault stops the run: start no other agent."""
        return self.fault.message is not None or self.cancel_requested()

    def paths(self) -> list[str]:
        """The repository paths of the task's files, entry source first."""
        return kernel_paths(self.store, self.task)


def kernel_paths(store: CandidateStore, task: KernelTask) -> list[str]:
    """The repository paths of the task's files, entry source first."""
    return [store.relative(p) for p in [task.source, *task.extra_sources]]
