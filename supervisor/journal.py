"""A run's journal file: ``.evoteam/runs/<run>/journal.jsonl``, a version line then one event per line, appended
and fsynced.

The journal is the run's only state: everything the supervisor, ``evoteam show`` and the language server know
about a run is derived from it. Its first line says its format and version (``{"format":"evoteam-journal",
"kind":"journal","version":2}``); every other line is ``{"data":{...},"kind":K,"seq":N}``, ``kind`` and ``data``
being one of the events of ``events.py``. A journal of another version, or a file that is no journal, is a
``JournalError`` whose message says so in one line; it is never folded.

Appends are serialized (threads) and each is fsynced before ``append`` returns, so a run killed at any point
leaves every event it reported. A torn last line (killed mid-write) is skipped on read and cut off before the
next append, so the file stays one valid event per line. The file itself is behind ``JournalFile`` (the disk,
or ``MemoryFile`` in tests, which counts what is read).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam.supervisor.events import EVENT, Event, payload

FORMAT = "evoteam-journal"
FORMAT_VERSION = 2
"""The journal format this evoteam reads and writes. 1: the unversioned journals of earlier evoteams."""
HEADER = json.dumps({"format": FORMAT, "kind": "journal", "version": FORMAT_VERSION}, separators=(",", ":")).encode()
"""The journal's first line (without its newline)."""


class JournalError(ValueError):
    """A journal that cannot be read: another format version, not a journal, or a line that is no event (not a
    torn write) or does not fit the run; the message says which, and where, in one line."""


class Entry(BaseModel):
    """One journal line: the event and its sequence number (0 for the run's first event)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    seq: int = Field(ge=0)
    event: Event


class JournalFile(Protocol):
    """Where a journal's bytes live."""

    def read(self) -> bytes:
        """The whole file (empty when there is none)."""
        ...

    def append(self, data: bytes) -> None:
        """Appends ``data``, durably before returning (creating the file)."""
        ...

    def truncate(self, size: int) -> None:
        """Cuts the file to its first ``size`` bytes, durably."""
        ...


class DiskFile:
    """A journal file on disk; appends and cuts are fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def append(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, size: int) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)


class MemoryFile:
    """The fake: a journal in memory that counts its reads and the bytes they returned."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = data
        self.reads = 0
        self.bytes_read = 0

    def read(self) -> bytes:
        self.reads += 1
        self.bytes_read += len(self.data)
        return self.data

    def append(self, data: bytes) -> None:
        self.data += data

    def truncate(self, size: int) -> None:
        self.data = self.data[:size]


class Journal:
    def __init__(self, path: Path, file: JournalFile | None = None) -> None:
        self.path = path
        self.file: JournalFile = file if file is not None else DiskFile(path)
        self._lock = threading.Lock()
        self._next: int | None = None
        """The next event's sequence number, once the file was read."""
        self._cut: int | None = None
        """Where a torn last line starts (cut before the next append)."""
        self._newline = False
        """The last line lost only its newline (added before the next append)."""
        self._header_missing = False
        """The file has no version line yet (written with the first event)."""

    def entries(self) -> list[Entry]:
        """Every event with its sequence number (the file is read once)."""
        with self._lock:
            return self._load()

    def events(self) -> list[Event]:
        return [entry.event for entry in self.entries()]

    def append(self, event: Event) -> Entry:
        """Appends ``event`` (fsynced) and returns it with its sequence number. The first append of a ``Journal``
        reads the file (unless ``entries`` did), to number the event and repair a torn last line."""
        with self._lock:
            if self._next is None:
                self._load()
            assert self._next is not None
            head = b""
            if self._cut is not None:
                self.file.truncate(self._cut)
                self._cut = None
            if self._newline:
                head, self._newline = b"\n", False
            if self._next == 0 and self._header_missing:
                head += HEADER + b"\n"
            entry = Entry(seq=self._next, event=event)
            self.file.append(head + encode(entry))
            self._next += 1
            self._header_missing = False
            return entry

    def _load(self) -> list[Entry]:
        raw = self.file.read()
        lines = raw.split(b"\n")
        complete, last = lines[:-1], lines[-1]
        self._cut, self._newline, self._header_missing = None, False, False
        if not complete:
            self._next = 0
            if not last or HEADER.startswith(last):  # nothing yet, or its version line torn
                self._cut, self._header_missing = (0 if last else None), True
            else:
                check_header(last, self.path)  # the version line without its newline, or no journal
                self._newline = True
            return []
        check_header(complete[0], self.path)
        entries = [parse_line(line, f"{self.path}:{n}") for n, line in enumerate(complete[1:], start=2) if line.strip()]
        if last.strip():  # no newline yet: a torn write, unless it parses (then only its newline was lost)
            try:
                entries.append(decode(json.loads(last), ""))
                self._newline = True
            except (ValueError, JournalError):
                self._cut = len(raw) - len(last)
        self._next = entries[-1].seq + 1 if entries else 0
        return entries


def encode(entry: Entry) -> bytes:
    """The journal line of ``entry``, with its newline (keys sorted: the line's own ``kind`` comes after its
    ``data``)."""
    line = {"seq": entry.seq, "kind": entry.event.kind, "data": payload(entry.event)}
    return json.dumps(line, separators=(",", ":"), sort_keys=True).encode("utf-8") + b"\n"


def decode(raw: Any, where: str) -> Entry:
    """The entry of one journal line's JSON value; ``where`` names the line in the error."""
    if not isinstance(raw, dict) or set(raw) != {"seq", "kind", "data"} or not isinstance(raw["data"], dict):
        raise JournalError(f"{where}: not a journal event (a line is {{seq, kind, data}})")
    try:
        event = EVENT.validate_python({**raw["data"], "kind": raw["kind"]})
        return Entry(seq=raw["seq"], event=event)
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(p) for p in error["loc"])
        raise JournalError(f"{where}: not a journal event: {at}: {error['msg']}") from None


def parse_line(line: bytes, where: str) -> Entry:
    """One complete journal line (not the header) as an entry."""
    try:
        raw = json.loads(line)
    except ValueError:
        raise JournalError(f"{where}: not a journal event: not JSON") from None
    return decode(raw, where)


def check_header(line: bytes, path: Path | str) -> None:
    """Raises JournalError unless ``line`` (a journal's first) is this evoteam's journal header."""
    try:
        raw = json.loads(line)
    except ValueError:
        raw = None
    if isinstance(raw, dict) and raw.get("format") == FORMAT:
        version = raw.get("version")
        if version != FORMAT_VERSION:
            raise JournalError(f"journal {path} has format version {version}; this evoteam reads {FORMAT_VERSION}")
        return
    if isinstance(raw, dict) and {"seq", "kind", "data"} <= set(raw):
        raise JournalError(
            f"journal {path} has format version 1 (no version line: an earlier evoteam wrote it); "
            f"this evoteam reads {FORMAT_VERSION}"
        )
    raise JournalError(f"{path} is not an evoteam journal (its first line is not a journal version line)")
