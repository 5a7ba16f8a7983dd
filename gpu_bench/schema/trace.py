"""FlashInfer-Bench ``Evaluation`` and ``Trace``, with evoteam's extra ``REJECTED`` status."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from evoteam.gpu_bench.schema._base import Model, NonEmptyStr
from evoteam.gpu_bench.schema.workload import Workload


class EvaluationStatus(StrEnum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    # evoteam: the candidate broke the harness's rules (changed its inputs, behaved differently when timed).
    REJECTED = "REJECTED"


class Correctness(Model):
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict[str, Any] | None = None

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative(cls, v: float) -> float:
        if not math.isnan(v) and v < 0:
            raise ValueError("must be non-negative or NaN")
        return v


class Performance(Model):
    """Latencies in milliseconds; ``speedup_factor`` = reference (baseline) latency / latency."""

    latency_ms: float = Field(default=0.0, ge=0.0)
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    speedup_factor: float = Field(default=0.0, ge=0.0)


class Environment(Model):
    hardware: NonEmptyStr
    libs: dict[str, str] = Field(default_factory=dict)


class Evaluation(Model):
    status: EvaluationStatus
    environment: Environment
    timestamp: NonEmptyStr
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None

    @model_validator(mode="after")
    def _metrics_match_status(self) -> Evaluation:
        needs_correctness = self.status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        needs_performance = self.status == EvaluationStatus.PASSED
        if needs_correctness != (self.correctness is not None):
            raise ValueError(f"status {self.status} {'needs' if needs_correctness else 'excludes'} correctness")
        if needs_performance != (self.performance is not None):
            raise ValueError(f"status {self.status} {'needs' if needs_performance else 'excludes'} performance")
        return self


class Trace(Model):
    """One workload of one definition, and (unless it is a workload-only trace) a solution's evaluation."""

    definition: NonEmptyStr
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None
