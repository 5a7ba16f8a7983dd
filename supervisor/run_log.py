"""``RunLog``: a running run's journal and its state together; ``record`` writes an event, then applies it.

The journal is read and folded once, when the run opens it (a resume is that replay); from then on each event
is appended (fsynced) and applied to the in-memory ``RunState`` exactly once, so no step of a round reads the
journal again. Agents record from their own threads: an event is appended and applied under one lock.
``JournaledBudget`` is the run's token budget: what agents charge to it is recorded as ``tokens`` events.
"""

from __future__ import annotations

import threading

from evoteam.roles.budget import PricingTable, TokenBudget
from evoteam.roles.llm import Usage
from evoteam.supervisor.events import Event, Submitted, TokensSpent
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.state import RunState, apply, fold


class RunLog:
    def __init__(self, journal: Journal, state: RunState) -> None:
        self.journal = journal
        self.state = state
        """The run as its journal says (read it; only ``record`` changes it)."""
        self._lock = threading.Lock()

    @classmethod
    def open(cls, journal: Journal) -> RunLog:
        """Reads and folds the journal (once)."""
        return cls(journal, fold(journal.events()))

    def record(self, event: Event) -> None:
        """Appends ``event`` to the journal (fsynced), then applies it to the state."""
        with self._lock:
            self.journal.append(event)
            apply(self.state, event)

    def record_submission(self, event: Submitted) -> bool:
        """Records a submission unless its candidate is known (the same content from the same agent, as a re-run
        after a resume makes it: recorded once); whether it was recorded."""
        with self._lock:
            if event.id in self.state.candidates:
                return False
            self.journal.append(event)
            apply(self.state, event)
            return True

    def snapshot(self) -> RunState:
        """A copy of the state that later records leave as it is (for readers on other threads)."""
        with self._lock:
            return self.state.thawed()


class JournaledBudget(TokenBudget):
    """The run's one budget: each charge is also recorded (``tokens``), so a resumed run restores its spending
    from the journal and the budget stays a hard total across kills."""

    def __init__(self, total: int, log: RunLog, pricing: PricingTable | None = None) -> None:
        super().__init__(total, pricing)
        self.log = log
        for (role, agent), usage in log.state.tokens.items():  # spent before a resume: charged, not recorded again
            super().charge(usage, role, agent, "")

    def charge(self, usage: Usage, role: str, agent: str, model: str) -> None:
        super().charge(usage, role, agent, model)
        self.log.record(TokensSpent(role=role, agent=agent, model=model, usage=usage))
