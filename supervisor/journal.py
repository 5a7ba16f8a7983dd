"""A run's journal: ``.evoteam/runs/<run>/journal.jsonl``, one JSON event per line, appended and fsynced.

The journal is the run's only state: everything the supervisor, ``evoteam show`` and the language server know
about a run is derived from it. Appends are serialized (threads) and each is fsynced before ``append`` returns,
so a run killed at any point leaves every event it reported. A torn last line (killed mid-write) is skipped on
read and cut off before the next append, so the file stays one valid event per line.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class JournalError(ValueError):
    """A journal line that is valid JSON but not an event (not a torn write); the message names the line."""


class Event(BaseModel):
    """One journal line: a sequence number, the kind, and the kind's fields (checked by the reader of that kind)."""

    model_config = ConfigDict(extra="forbid")
    seq: int = Field(ge=0)
    kind: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._next: int | None = None

    def events(self) -> list[Event]:
        return list(self._read())

    def append(self, kind: str, data: dict[str, Any] | None = None) -> Event:
        """Appends one event (fsynced) and returns it with its sequence number."""
        with self._lock:
            if self._next is None:
                self._repair()
                events = self.events()
                self._next = events[-1].seq + 1 if events else 0
            event = Event(seq=self._next, kind=kind, data=data or {})
            line = json.dumps(event.model_dump(mode="json"), separators=(",", ":"), sort_keys=True) + "\n"
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._next += 1
            return event

    def _read(self) -> Iterator[Event]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")
        complete, last = lines[:-1], lines[-1]
        for number, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            yield _parse(line, self.path, number)
        if last.strip():  # no newline yet: a torn write, unless it parses (then only its newline was lost)
            try:
                yield Event.model_validate_json(last)
            except ValidationError:
                return

    def _repair(self) -> None:
        """Cuts a torn last line off, so the next append starts on a line of its own."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        if not raw or raw.endswith(b"\n"):
            return
        cut = raw.rfind(b"\n") + 1
        tail = raw[cut:]
        try:
            Event.model_validate_json(tail)
            keep = raw + b"\n"  # a whole event whose newline was lost
        except ValidationError:
            keep = raw[:cut]
        tmp = self.path.with_suffix(".repair")
        tmp.write_bytes(keep)
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        tmp.replace(self.path)


def _parse(line: bytes, path: Path, number: int) -> Event:
    try:
        return Event.model_validate_json(line)
    except ValidationError as exc:
        raise JournalError(f"{path}:{number}: not a journal event: {exc.errors()[0]['msg']}") from None
