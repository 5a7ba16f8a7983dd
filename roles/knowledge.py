"""The knowledge store of one kernel: ``.evoteam/knowledge/<kernel>/`` under a repository, just files.

``index.jsonl`` holds one JSON line per entry for code; one Markdown file per kind holds the same entries for
people. ``status.jsonl`` holds the supervisor's knowledge policy on entries, latest line per entry wins: a
retired entry no longer shows, a quarantined one shows only as such (nobody builds on it or avoids it), a
verified one is a strategy resting on a measurement the supervisor cited. Appends are fsynced and serialized;
reading skips a torn last line (a run killed mid-append). Imports nothing of evoteam.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Kind(StrEnum):
    HARDWARE = "hardware"
    """An observation about the machine (cache sizes, what the profiler showed, bandwidth reached)."""
    STRATEGY = "strategy"
    """A verified strategy: a change that measurably helped."""
    FAILED_ATTEMPT = "failed_attempt"
    """An idea that was tried and did not help (with evidence), so it is not retried blindly."""
    QUARANTINED = "quarantined"
    """An entry the supervisor quarantined (``status.jsonl``): shown as such, relied on by nobody. Never
    written: entries are read as this kind."""
    INCONCLUSIVE = "inconclusive"
    """A change whose measured effect could not be told from noise (its interval holds 1): not a fact either
    way, so neither a strategy to build on nor a failure to avoid."""
    PLAN = "plan"
    """The current plan; the latest entry is the plan in force."""
    ROLE_RECORD = "role_record"
    """What a role did in a round (written by the supervisor)."""


TITLES = {
    Kind.HARDWARE: "Hardware observations",
    Kind.STRATEGY: "Verified strategies",
    Kind.FAILED_ATTEMPT: "Failed attempts",
    Kind.INCONCLUSIVE: "Inconclusive (not told apart from noise)",
    Kind.QUARANTINED: "Quarantined by the supervisor (do not rely on these)",
    Kind.PLAN: "Plan",
    Kind.ROLE_RECORD: "Role records",
}


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidate: str | None = Field(default=None, description="the candidate (solution name) the note is about")
    status: str | None = Field(default=None, description="its evaluation status, e.g. PASSED or COMPILE_ERROR")
    numbers: dict[str, float] = Field(
        default_factory=dict, description="measured numbers, e.g. {'geomean_speedup': 1.12, 'registers': 64}"
    )
    speedup: float | None = None
    """The harness's geomean speedup of the candidate over ``over`` (paired timing), when it measured one."""
    ci: tuple[float, float] | None = None
    """Its 95% interval."""
    over: str | None = None
    """What it was timed against: the candidate's parent (the round's start)."""

    def text(self) -> str:
        parts = [p for p in (self.candidate, self.status) if p]
        if self.speedup is not None:
            interval = f" [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci is not None else ""
            parts.append(f"measured {self.speedup:.3f}x{interval} over {self.over or 'its parent'}")
        parts += [f"{k}={v:g}" for k, v in self.numbers.items()]
        return ", ".join(parts)


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    kind: Kind
    title: str = Field(min_length=1)
    body: str = ""
    evidence: Evidence | None = None
    role: str = ""
    agent: str = ""
    round: int = 0
    timestamp: str

    def line(self, body: bool = True) -> str:
        """One line for prompts and tool results (the body cut at 240 characters; left out with ``body``
        False)."""
        who = f" ({self.role}, round {self.round})" if self.role else f" (round {self.round})"
        evidence = f" [{self.evidence.text()}]" if self.evidence and self.evidence.text() else ""
        text = " ".join(self.body.split()) if body else ""
        text = text if len(text) <= 240 else text[:237] + "..."
        return f"- [{self.kind.value}] {self.title}{who}{evidence}" + (f": {text}" if text else "")


def measured_kind(status: str, ci: tuple[float, float] | None) -> Kind:
    """What a measurement of a change over its parent makes of it: a failed attempt when the candidate did not
    pass or its interval lies below 1, a verified strategy when it lies above 1, else inconclusive (no
    interval, or one that holds 1)."""
    if status != "PASSED":
        return Kind.FAILED_ATTEMPT
    if ci is None or ci[0] <= 1.0 <= ci[1]:
        return Kind.INCONCLUSIVE
    return Kind.STRATEGY if ci[0] > 1.0 else Kind.FAILED_ATTEMPT


SUMMARY_KINDS = (
    Kind.STRATEGY,
    Kind.FAILED_ATTEMPT,
    Kind.INCONCLUSIVE,
    Kind.HARDWARE,
    Kind.QUARANTINED,
    Kind.ROLE_RECORD,
)
"""The kinds a summary lists, in its order, after the plan."""

NoteStatus = Literal["retired", "quarantined", "verified"]


class StatusChange(BaseModel):
    """The supervisor's policy on one entry, from a round on."""

    model_config = ConfigDict(extra="forbid")
    entry: str
    status: NoteStatus
    why: str = ""
    evidence: Evidence | None = None
    """For ``verified``: the measurement the entry now rests on."""
    round: int = 0
    timestamp: str = ""


Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class KnowledgeStore:
    """The entries of one kernel under ``<repo>/.evoteam/knowledge/<kernel>/``; safe to share between threads."""

    def __init__(self, repo_root: Path, kernel: str, clock: Clock = _now) -> None:
        if not kernel or "/" in kernel or kernel in (".", ".."):
            raise ValueError(f"invalid kernel name for the knowledge store: {kernel!r}")
        self.folder = repo_root / ".evoteam" / "knowledge" / kernel
        self.kernel = kernel
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def index(self) -> Path:
        return self.folder / "index.jsonl"

    @property
    def status_file(self) -> Path:
        return self.folder / "status.jsonl"

    def set_status(
        self, entry_id: str, status: NoteStatus, why: str = "", evidence: Evidence | None = None, round: int = 0
    ) -> bool:
        """Records the supervisor's policy on an entry; False (nothing written) when it already has that
        status. A KeyError names an entry that does not exist."""
        if entry_id not in {e.id for e in self.entries(raw=True)}:
            raise KeyError(f"no knowledge entry {entry_id!r}")
        current = self.statuses().get(entry_id)
        if current is not None and current.status == status:
            return False
        change = StatusChange(
            entry=entry_id,
            status=status,
            why=why,
            evidence=evidence,
            round=round,
            timestamp=self._clock().isoformat(timespec="seconds"),
        )
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            _append(self.status_file, change.model_dump_json(exclude_none=True) + "\n", newline_first=True)
        return True

    def statuses(self) -> dict[str, StatusChange]:
        """The latest policy on each entry that has one."""
        latest: dict[str, StatusChange] = {}
        for line in _lines(self.status_file):
            try:
                change = StatusChange.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError):
                continue
            latest[change.entry] = change
        return latest

    def markdown(self, kind: Kind) -> Path:
        return self.folder / f"{kind.value}.md"

    def add(
        self,
        kind: Kind,
        title: str,
        body: str = "",
        evidence: Evidence | None = None,
        role: str = "",
        agent: str = "",
        round: int = 0,
    ) -> Entry:
        entry = Entry(
            id=uuid.uuid4().hex[:12],
            kind=kind,
            title=" ".join(title.split()),
            body=body.strip(),
            evidence=evidence,
            role=role,
            agent=agent,
            round=round,
            timestamp=self._clock().isoformat(timespec="seconds"),
        )
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            _append(self.index, entry.model_dump_json(exclude_none=True) + "\n", newline_first=True)
            md = self.markdown(kind)
            header = "" if md.exists() else f"# {TITLES[kind]} — {self.kernel}\n"
            _append(md, header + _markdown(entry), newline_first=False)
        return entry

    def entries(self, raw: bool = False) -> list[Entry]:
        """Every entry in order, as the supervisor's policy makes it (retired ones left out, quarantined ones
        as ``quarantined``, verified ones as strategies with the measurement cited); ``raw``: as written. A
        line that does not parse (a torn last line) is skipped."""
        out = []
        for line in _lines(self.index):
            try:
                out.append(Entry.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError):
                continue
        if raw:
            return out
        statuses = self.statuses()
        shown = []
        for entry in out:
            change = statuses.get(entry.id)
            if change is None:
                shown.append(entry)
            elif change.status == "quarantined":
                shown.append(entry.model_copy(update={"kind": Kind.QUARANTINED}))
            elif change.status == "verified":
                evidence = change.evidence or entry.evidence
                shown.append(entry.model_copy(update={"kind": Kind.STRATEGY, "evidence": evidence}))
        return shown

    def query(self, kind: Kind | None = None, text: str | None = None, limit: int | None = None) -> list[Entry]:
        """Entries of ``kind`` whose title, body or evidence hold every word of ``text``; newest first."""
        return _select(self.entries(), kind, text, limit)

    def plan(self) -> Entry | None:
        plans = self.query(Kind.PLAN, limit=1)
        return plans[0] if plans else None

    def summary(self, limit: int = 20) -> str:
        """For prompts: the plan in force, then the newest strategies, failed attempts, observations and role
        records, at most ``limit`` lines in all (the store read once)."""
        entries = self.entries()
        sections = []
        plans = _select(entries, Kind.PLAN, limit=1)
        if plans:
            plan = plans[0]
            sections.append(f"Current plan: {plan.title}" + (f"\n{plan.body}" if plan.body else ""))
        left = limit
        for kind in SUMMARY_KINDS:
            if left <= 0:
                break
            items = _select(entries, kind, limit=left)
            if items:
                sections.append(f"{TITLES[kind]}:\n" + "\n".join(e.line() for e in items))
                left -= len(items)
        return "\n\n".join(sections)

    def is_known_failure(self, description: str, threshold: float = 0.5) -> Entry | None:
        """The recorded failed attempt most like ``description`` (word overlap, Dice score >= ``threshold``,
        at least two shared words), or None. A failed attempt that ``description`` cites by its id is not a
        match: the text is about it, not a repeat of it. A heuristic: it flags likely repeats, it does not prove
        them."""
        words = _words(description)
        best: tuple[float, Entry] | None = None
        for entry in self.query(Kind.FAILED_ATTEMPT):
            if entry.id in description:
                continue
            other = _words(f"{entry.title} {entry.body}")
            shared = len(words & other)
            if shared < 2:
                continue
            score = 2 * shared / (len(words) + len(other))
            title_score = len(words & _words(entry.title)) / max(1, len(_words(entry.title)))
            score = max(score, title_score)
            if score >= threshold and (best is None or score > best[0]):
                best = (score, entry)
        return best[1] if best else None


_STOP = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "in", "into", "is"),
        *("it", "its", "of", "on", "or", "so", "than", "that", "the", "then", "this", "to", "was", "were", "will"),
        *("with", "without", "we", "our", "use", "using", "used", "try", "tried", "not", "no"),
    }
)


def _stem(word: str) -> str:
    for suffix in ("izing", "ising", "ized", "ised", "ing", "ize", "ise", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) > 1 and w not in _STOP}


def _markdown(entry: Entry) -> str:
    who = ", ".join(p for p in (entry.role, entry.agent, f"round {entry.round}", entry.timestamp) if p)
    lines = ["", f"## {entry.title}", f"*{who}* — `{entry.id}`"]
    if entry.evidence and entry.evidence.text():
        lines.append(f"Evidence: {entry.evidence.text()}")
    if entry.body:
        lines += ["", entry.body]
    return "\n".join(lines) + "\n"


def _append(path: Path, text: str, newline_first: bool) -> None:
    """Appends ``text`` in one write and fsyncs; first ends a torn last line so the new entry stands alone."""
    with path.open("ab") as f:
        if newline_first and f.tell() > 0:
            with path.open("rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    text = "\n" + text
        f.write(text.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def _select(
    entries: list[Entry], kind: Kind | None = None, text: str | None = None, limit: int | None = None
) -> list[Entry]:
    """``KnowledgeStore.query`` over entries already read."""
    words = [w.lower() for w in (text or "").split()]
    found = []
    for entry in reversed(entries):
        if kind is not None and entry.kind != kind:
            continue
        haystack = f"{entry.title} {entry.body} {entry.evidence.text() if entry.evidence else ''}".lower()
        if all(w in haystack for w in words):
            found.append(entry)
    return found[:limit] if limit is not None else found


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return []
