"""One run's journal folded for the editor, kept current by reading only what was appended since the last read.

The state it holds has no per-workload outcomes: a run of 1,000 candidates over 47 workloads would keep 47,000
outcome objects that only a hover or a diagnostic of one candidate ever reads. It remembers where each
candidate's ``evaluated`` line starts instead, and ``workloads`` reads that one line back when asked.

Each update folds the new events into a copy of the previous state (its containers copied, candidates that can
still change copied), so a state handed out earlier never changes under a request that is reading it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from evoteam.supervisor.journal import Event, JournalError
from evoteam.supervisor.records import WorkloadOutcome
from evoteam.supervisor.state import RunState, apply

_TAIL = 64
"""Bytes before the read offset compared on each update: a journal rewritten in place, not appended to, is
folded again from its start."""
_OUTCOMES = TypeAdapter(list[WorkloadOutcome])


class RunFold:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self.state = RunState()
        self.evaluated_at: dict[str, int] = {}
        """Candidate id → byte offset of its ``evaluated`` line."""
        self._offset, self._lines, self._tail = 0, 0, b""

    def update(self) -> bool:
        """Folds the events appended since the last update; True when there were any. A line that is not an
        event (or an event that does not fit the run) raises JournalError and leaves the state as it was; a
        journal that shrank or was rewritten is folded again from its start. A torn last line (its writer not
        done) is left for the next update."""
        with self.path.open("rb") as handle:
            rewritten = self._offset > 0 and not self._continues(handle)
            if not rewritten:
                return self._read_on(handle)
        fresh = RunFold(self.path)
        fresh.update()  # raises before anything of this fold changes
        self.state, self.evaluated_at = fresh.state, fresh.evaluated_at
        self._offset, self._lines, self._tail = fresh._offset, fresh._lines, fresh._tail
        return True

    def _read_on(self, handle: Any) -> bool:
        """Folds what follows the offset in the open journal ``handle``."""
        handle.seek(self._offset)
        events: list[tuple[int, Event]] = []
        offset, lines, tail = self._offset, self._lines, self._tail
        for line in handle:
            if line.strip():
                try:
                    events.append((offset, _lean(line)))
                except (ValueError, ValidationError) as exc:
                    if not line.endswith(b"\n"):
                        break
                    raise JournalError(f"{self.path}:{lines + 1}: not a journal event: {exc}") from None
            offset, lines, tail = offset + len(line), lines + 1, (tail + line)[-_TAIL:]
        state, evaluated = _thaw(self.state), {}
        try:
            for at, event in events:
                apply(state, event)
                if event.kind == "evaluated":
                    evaluated[event.data["record"]["id"]] = at
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalError(f"{self.path}: an event that does not fit the run: {exc!r}") from None
        if events:
            self.state = state
            self.evaluated_at |= evaluated
        self._offset, self._lines, self._tail = offset, lines, tail
        return bool(events)

    def workloads(self, candidate: str) -> list[WorkloadOutcome]:
        """The per-workload outcomes of ``candidate``'s evaluation, read from its journal line ([] when it has
        none, was not evaluated, or the journal changed under it)."""
        at = self.evaluated_at.get(candidate)
        if at is None:
            return []
        try:
            with self.path.open("rb") as handle:
                handle.seek(at)
                record = json.loads(handle.readline())["data"]["record"]
            if record.get("id") != candidate:
                return []
            return _OUTCOMES.validate_python(record.get("workloads", []))
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            return []

    def _continues(self, handle: Any) -> bool:
        """Whether the file still holds, just before the offset, the bytes this fold read there."""
        start = self._offset - len(self._tail)
        handle.seek(start)
        return bool(handle.read(len(self._tail)) == self._tail)


def _lean(line: bytes) -> Event:
    """A journal line as an event, without the per-workload outcomes of the records it carries."""
    raw = json.loads(line)
    data = raw.get("data") if isinstance(raw, dict) else None
    if isinstance(data, dict):
        records = [data.get("record")] if raw.get("kind") == "evaluated" else []
        if raw.get("kind") == "round_finished" and isinstance(data.get("record"), dict):
            records = data["record"].get("candidates") or []
        for record in records:
            if isinstance(record, dict):
                record.pop("workloads", None)
    return Event.model_validate(raw)


def _thaw(state: RunState) -> RunState:
    """A copy of ``state`` that folding more events into leaves ``state`` as it is."""
    candidates = {
        cid: c if c.record is not None and c.sha is not None else c.model_copy() for cid, c in state.candidates.items()
    }
    return state.model_copy(
        update={
            "rounds_started": list(state.rounds_started),
            "rounds_finished": list(state.rounds_finished),
            "candidates": candidates,
            "finished_agents": set(state.finished_agents),
            "decisions": list(state.decisions),
            "tokens": dict(state.tokens),
            "profiled_rounds": set(state.profiled_rounds),
            "knowledge_rounds": set(state.knowledge_rounds),
        }
    )
