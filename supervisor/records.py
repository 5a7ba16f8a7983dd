"""What the supervisor reads after each round: a record per candidate and per round (derived from the journal)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import EvaluationStatus


class WorkloadOutcome(BaseModel):
    """One workload of a candidate's evaluation, as the report shows it."""

    model_config = ConfigDict(extra="forbid")
    uuid: str
    status: EvaluationStatus
    axes: dict[str, int] = Field(default_factory=dict)
    """The workload's variable axes (``batch_size`` ...): what the editor and the report name it by."""
    speedup: float | None = None
    """The candidate's speedup over the baseline (paired timing: the median per-pair ratio); None unless the
    workload PASSED."""
    ci: tuple[float, float] | None = None
    """95% interval of ``speedup`` (paired timing)."""
    flags: list[str] = Field(default_factory=list)
    """``noise``, ``excessive``, ``contended``: why not to take ``speedup`` at face value."""
    latency_ms: float | None = None
    """The candidate's median latency, when it was timed."""
    reference_latency_ms: float | None = None
    """The baseline's median latency, when it was timed."""
    reason: str = ""
    """Why the workload failed (the first line, shortened); empty when it passed."""

    @property
    def name(self) -> str:
        """``batch_size=64, seq_len=128``: the workload by its axes (its uuid where none were recorded)."""
        return ", ".join(f"{axis}={value}" for axis, value in self.axes.items()) or self.uuid

    def speed(self) -> str:
        """``1.23x [1.19, 1.27]``: the speedup over the baseline and its 95% interval; ``–`` without one."""
        if self.speedup is None:
            return "–"
        return f"{self.speedup:.2f}x" + (f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci is not None else "")


class CandidateRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    round: int = Field(ge=0)
    """The round that made it; 0 for the start kernel (``r00-start``)."""
    role: str
    status: EvaluationStatus
    geomean_speedup: float | None = None
    """Geomean over the workloads when it PASSED, else None: for a candidate its speedup over the start
    kernel (the run's incumbent), for the start its speedup over the task's baseline."""
    geomean_ci: tuple[float, float] | None = None
    """95% bootstrap interval of the geomean (paired timing), when it PASSED."""
    faster: int = 0
    total: int = 0
    rationale: str = ""
    violations: list[str] = Field(default_factory=list)
    """Constraint violations of the candidate (``require wgmma.mma_async: absent``, ``max_registers``...)."""
    instruction_classes: list[str] = Field(default_factory=list)
    """The instruction classes in its generated code (``wgmma``, ``mma.sync``, ``TMA``...: CUDA only)."""
    dropped_constructs: list[str] = Field(default_factory=list)
    """Instruction classes the best had that this candidate lost, by its compiled code: the best's
    tensor-core class when this one's generation is lower, an asynchronous-copy class (``TMA``)."""
    downgrades: list[str] = Field(default_factory=list)
    """The same as people read them: ``wgmma → mma.sync``, ``TMA lost``."""
    registers: int | None = None
    """The most registers per thread any of its kernels uses (ptxas; CUDA only)."""
    spill_bytes: int = 0
    """Bytes its kernels spill, stores and loads together (ptxas; CUDA only)."""
    known_failure: str | None = None
    """The id of the knowledge-store failed attempt this candidate repeats, if it does."""
    vetoed: bool = False
    retimed_from: float | None = None
    """The geomean of the first measurement, when this record holds the re-timing against the start that a
    contender for best gets before the best is named; None when it was measured once."""
    workloads: list[WorkloadOutcome] = Field(default_factory=list)
    """Per-workload outcomes (journals written before they were recorded have none)."""

    def speed(self) -> str:
        """The geomean with its interval as people read it (``1.976x (95% CI 1.73-2.10)``); ``-`` without one."""
        if self.geomean_speedup is None:
            return "-"
        ci = f" (95% CI {self.geomean_ci[0]:.2f}-{self.geomean_ci[1]:.2f})" if self.geomean_ci else ""
        return f"{self.geomean_speedup:.3f}x{ci}"


class RoundRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round: int = Field(ge=1)
    roles: list[str]
    protocol: str = "sequential"
    candidates: list[CandidateRecord] = Field(default_factory=list)
    tokens: int = Field(default=0, ge=0)
    """Tokens spent in this round by every role."""
    profiled: bool = False
    """A profile (the ``profile`` tool, or a hardware note) was made in this round."""
    knowledge_read: bool = False
    """Some role of the round read the knowledge store."""
    idle_roles: list[str] = Field(default_factory=list)
    """Roles of the round that added nothing: no review, no new candidate (resubmitting the parent's content
    adds nothing) and, having submitted nothing, no compile, evaluation, profile or note (sitting out too)."""

    def best(self) -> float | None:
        passed = [c.geomean_speedup for c in self.candidates if c.geomean_speedup is not None and not c.vetoed]
        return max(passed) if passed else None
