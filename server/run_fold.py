"""One run's journal folded for the editor, kept current by reading only what was appended since the last read.

It reads the supervisor's typed events (``evoteam.supervisor.events``, through ``journal.decode``) and folds them
with the supervisor's own ``apply``; the journal's version line is checked like the supervisor checks it, so a
journal of another format version is a ``JournalError`` with the same one-line message.

The state it holds has no per-workload outcomes: a run of 1,000 candidates over 47 workloads would keep 47,000
outcome objects that only a hover or a diagnostic of one candidate ever reads. It remembers where each
candidate's ``evaluated`` line starts instead, and ``workloads`` reads that one line back when asked.

Each update folds the new events into a copy of the previous state (``RunState.thawed``), so a state handed out
earlier never changes under a request that is reading it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError

from evoteam.supervisor.events import Evaluated, Retimed
from evoteam.supervisor.journal import Entry, JournalError, check_header, decode
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
        """Folds the events appended since the last update; True when there were any. A journal of another
        format version, a line that is not an event (or an event that does not fit the run) raises JournalError
        and leaves the state as it was; a journal that shrank or was rewritten is folded again from its start. A
        torn last line (its writer not done) is left for the next update."""
        with self.path.open("rb") as handle:
            rewritten = self._offset > 0 and not self._continues(handle)
            if not rewritten:
                return self._read_on(handle)
        fresh = RunFold(self.path)
        fresh.update()  # raises before anything of this fold changes
        self.state, self.evaluated_at = fresh.state, fresh.evaluated_at
        self._offset, self._lines, self._tail = fresh._offset, fresh._lines, fresh._tail
        return True

    def _read_on(self, handle: IO[bytes]) -> bool:
        """Folds what follows the offset in the open journal ``handle``."""
        handle.seek(self._offset)
        entries: list[tuple[int, Entry]] = []
        offset, lines, tail = self._offset, self._lines, self._tail
        for line in handle:
            if not line.endswith(b"\n"):
                break  # a torn line: its writer is not done
            if lines == 0:
                check_header(line.rstrip(b"\n"), self.path)
            elif line.strip():
                entries.append((offset, _lean(line, f"{self.path}:{lines + 1}")))
            offset, lines, tail = offset + len(line), lines + 1, (tail + line)[-_TAIL:]
        state, evaluated = self.state.thawed(), {}
        for at, entry in entries:
            apply(state, entry.event)
            if isinstance(entry.event, Evaluated | Retimed):
                evaluated[entry.event.record.id] = at
        if entries:
            self.state = state
            self.evaluated_at |= evaluated
        self._offset, self._lines, self._tail = offset, lines, tail
        return bool(entries)

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

    def _continues(self, handle: IO[bytes]) -> bool:
        """Whether the file still holds, just before the offset, the bytes this fold read there."""
        start = self._offset - len(self._tail)
        handle.seek(start)
        return bool(handle.read(len(self._tail)) == self._tail)


def _lean(line: bytes, where: str) -> Entry:
    """A journal line as an entry, without the per-workload outcomes of the records it carries."""
    try:
        raw: Any = json.loads(line)
    except ValueError:
        raise JournalError(f"{where}: not a journal event: not JSON") from None
    data = raw.get("data") if isinstance(raw, dict) else None
    if isinstance(data, dict):
        records = [data.get("record")] if raw.get("kind") in ("evaluated", "retimed") else []
        if raw.get("kind") == "round_finished" and isinstance(data.get("record"), dict):
            records = data["record"].get("candidates") or []
        for record in records:
            if isinstance(record, dict):
                record.pop("workloads", None)
    return decode(raw, where)
