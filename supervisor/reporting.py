"""What a run tells whoever watches it (the CLI's live view): the ``Reporter`` seam, its fakes, and the lines.

``update`` gets a snapshot of the run's state when a round starts, after each round and at the end;
``activity`` one line for each tool call of an agent, each submission and each evaluation, from any thread.
"""

from __future__ import annotations

import threading
from typing import Protocol

from evoteam.supervisor.events import AgentStep, Evaluated, Submitted
from evoteam.supervisor.state import RunState


class Reporter(Protocol):
    def update(self, state: RunState) -> None: ...

    def activity(self, line: str) -> None: ...


class SilentReporter:
    """Reports to no one (a run without a live view)."""

    def update(self, state: RunState) -> None:
        pass

    def activity(self, line: str) -> None:
        pass


class RecordingReporter:
    """The fake: keeps every state and line it was given."""

    def __init__(self) -> None:
        self.states: list[RunState] = []
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def update(self, state: RunState) -> None:
        with self._lock:
            self.states.append(state)

    def activity(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)


def step_line(step: AgentStep) -> str | None:
    """The activity line of an agent's step: its tool calls (None for the rest)."""
    if step.step != "tool":
        return None
    outcome = ("error: " if step.is_error else "") + step.result
    return f"{step.role} ({step.agent_id}) {step.tool}: {outcome}"[:200]


def submitted_line(event: Submitted) -> str:
    return f"{event.role} ({event.agent}) submitted {event.id}: {event.rationale}"[:200]


def evaluated_line(event: Evaluated) -> str:
    record = event.record
    speed = f" {record.geomean_speedup:.3f}x" if record.geomean_speedup is not None else ""
    return f"evaluated {record.id}: {record.status.value}{speed}"
