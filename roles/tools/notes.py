"""Knowledge tools: ``read_knowledge`` (query the kernel's store) and ``write_note`` (add an entry to it).

A strategy or failed attempt that names an evaluated candidate gets its standing from the harness, not from
the note: the candidate is timed against its parent (the round's start, paired), and the measurement decides
the kind it is stored as (``knowledge.measured_kind``: an interval holding 1 is ``inconclusive``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import BenchInputError, CandidateResult, Solution
from evoteam.roles.knowledge import Evidence, Kind, KnowledgeStore, measured_kind
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.evaluation import EvaluationCache

MAX_ENTRIES = 30


class ReadKnowledgeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["hardware", "strategy", "failed_attempt", "inconclusive", "plan", "role_record"] | None = Field(
        default=None, description="only entries of this kind; default all kinds"
    )
    query: str | None = Field(default=None, description="words that must all appear in an entry; default none")


class ReadKnowledgeTool:
    name = "read_knowledge"
    description = (
        "Read what the team has recorded about this kernel, newest first, each entry after its id: hardware "
        "observations, verified strategies, failed attempts (with evidence), the plan and role records."
    )
    input_model = ReadKnowledgeInput

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store

    def run(self, args: ReadKnowledgeInput) -> ToolResult:
        kind = Kind(args.kind) if args.kind else None
        found = self.store.query(kind, args.query)
        if not found:
            return ToolResult(content="no entries match", data={"count": 0})
        shown = found[:MAX_ENTRIES]
        blocks = []
        for e in shown:
            long = len(" ".join(e.body.split())) > 240  # the whole body below the line, not also cut in it
            block = f"{e.id} " + e.line(body=not long).removeprefix("- ")
            if long:
                block += f"\n{e.body}"
            blocks.append(block)
        hidden = len(found) - len(shown)
        more = f"\n({hidden} older entries not shown; narrow the query)" if hidden else ""
        return ToolResult(content="\n".join(blocks) + more, data={"count": len(found), "ids": [e.id for e in shown]})


class EvidenceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidate: str | None = Field(
        default=None,
        description="the candidate the note is about: the solution name an evaluation reported; a strategy or "
        "failed attempt naming one is measured against its parent and stored as what the measurement shows",
    )
    status: str | None = Field(default=None, description="its evaluation status, e.g. PASSED or INCORRECT_NUMERICAL")
    numbers: dict[str, float] = Field(
        default_factory=dict, description="measured numbers, e.g. {'geomean_speedup': 0.93, 'registers': 96}"
    )


class WriteNoteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["hardware", "strategy", "failed_attempt", "plan"] = Field(
        description="hardware: an observation about the machine; strategy: a change that measurably helped; "
        "failed_attempt: an idea that did not help; plan: the plan from now on"
    )
    title: str = Field(min_length=1, max_length=200, description="one line naming the idea or observation")
    body: str = Field(default="", max_length=8000, description="details: what was done, what was measured, why")
    evidence: EvidenceInput | None = Field(default=None, description="the candidate and numbers that support it")


class WriteNoteTool:
    name = "write_note"
    description = (
        "Record a note in the kernel's knowledge store, which survives rounds and runs. Back strategies and "
        "failed attempts with evidence (candidate, status, numbers)."
    )
    input_model = WriteNoteInput

    def __init__(
        self,
        store: KnowledgeStore,
        author: Author,
        evaluations: EvaluationCache | None = None,
        parent: Solution | None = None,
        require_citations: bool = False,
    ) -> None:
        self.store = store
        self.author = author
        self.evaluations = evaluations
        self.require_citations = require_citations
        self.parent = parent
        """The round's start, which a candidate named in a note is timed against; None: the incumbent the
        evaluations time against (the run's start)."""

    def run(self, args: WriteNoteInput) -> ToolResult:
        asked = Kind(args.kind)
        evidence = Evidence.model_validate(args.evidence.model_dump()) if args.evidence else None
        standing = ""
        verdict = asked in (Kind.STRATEGY, Kind.FAILED_ATTEMPT)
        if verdict and self.require_citations and (evidence is None or not evidence.candidate):
            return ToolResult(
                content="not recorded: the supervisor requires a strategy or failed attempt to name the candidate "
                "it rests on (evidence.candidate: the solution name its evaluation reported)",
                is_error=True,
            )
        if verdict and evidence is not None and evidence.candidate:
            measured = self._measure(evidence.candidate)
            if isinstance(measured, str) and self.require_citations:
                return ToolResult(content=f"not recorded: {measured}", is_error=True)
            if isinstance(measured, str):
                standing = f"\nnot measured ({measured}): the note is stored as written, without standing"
            else:
                result, over = measured
                s = result.summary
                evidence = evidence.model_copy(
                    update={
                        "status": result.status.value,
                        "speedup": s.geomean_speedup,
                        "ci": s.geomean_ci,
                        "over": over,
                    }
                )
                kind = measured_kind(result.status.value, s.geomean_ci)
                standing = f"\nmeasured: {evidence.text()}"
                if kind != asked:
                    standing += f"; stored as {kind.value}, not {asked.value}: the measurement decides"
                asked = kind
        kind = asked
        known = self.store.is_known_failure(f"{args.title} {args.body}") if kind == Kind.STRATEGY else None
        entry = self.store.add(
            kind,
            args.title,
            args.body,
            evidence,
            role=self.author.role,
            agent=self.author.agent_id,
            round=self.author.round,
        )
        content = f"recorded {kind.value} note {entry.id}: {entry.title}{standing}"
        data: dict[str, object] = {"id": entry.id, "kind": kind.value}
        if known is not None:
            content += (
                f"\nwarning: this matches a recorded failed attempt ({known.id}, round {known.round}): "
                f"{known.line().removeprefix('- ')}\nDo not retry it blindly: say what is different this time. "
                f"A note that is about that attempt cites its id ({known.id}) and gets no warning."
            )
            data["known_failure"] = known.id
        return ToolResult(content=content, data=data)

    def _measure(self, name: str) -> tuple[CandidateResult, str] | str:
        """The candidate timed against the round's start and what that was, or why it could not be."""
        if self.evaluations is None:
            return "no evaluations here"
        solution = self.evaluations.find(name)
        if solution is None:
            return f"no evaluated candidate is named {name!r}; name one as its evaluation reports it"
        try:
            if self.parent is None:
                return self.evaluations.evaluate(solution), "the start"
            if self.parent.content_hash() == solution.content_hash():
                return f"{name!r} is the round's start itself"
            return self.evaluations.versus(solution, self.parent), f"its parent {self.parent.name}"
        except BenchInputError as exc:
            return f"the task cannot be evaluated: {exc}"
