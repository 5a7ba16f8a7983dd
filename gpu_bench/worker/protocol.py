"""Messages between the evaluator and its worker process: one JSON object per line, validated both ways."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.schema import Definition, Environment, Solution, Workload
from evoteam.gpu_bench.worker.evaluate import EvalConfig, WorkloadOutcome


class BuildRequest(BaseModel):
    kind: Literal["build"] = "build"
    id: int
    solution: Solution
    definition: Definition
    isolate: bool = True
    """Load it as ``EvalConfig.isolate`` says (a C ABI or Python kernel on the CPU in a host of its own)."""


class EvaluateRequest(BaseModel):
    kind: Literal["evaluate"] = "evaluate"
    id: int
    definition: Definition
    workload: Workload
    solution: Solution
    config: EvalConfig
    blob_root: str | None = None


class ShutdownRequest(BaseModel):
    kind: Literal["shutdown"] = "shutdown"
    id: int = 0


Request = Annotated[BuildRequest | EvaluateRequest | ShutdownRequest, Field(discriminator="kind")]


class Ready(BaseModel):
    kind: Literal["ready"] = "ready"
    pid: int
    environment: Environment


class Built(BaseModel):
    kind: Literal["built"] = "built"
    id: int
    build: BuildResult
    load_error: str | None = None
    """Built, but the artifact cannot be loaded or lacks the entry point."""
    worker_exiting: bool = False
    """Loading the artifact changed the worker's process state (a constructor did): it exits after this answer."""


class Evaluated(BaseModel):
    kind: Literal["evaluated"] = "evaluated"
    id: int
    outcome: WorkloadOutcome
    log: str = ""
    """What the kernel printed (stdout and stderr) during this workload."""
    worker_exiting: bool = False
    """The worker's shared state was tampered with, or a CUDA error left its GPU context unusable; it exits
    after this answer and must be replaced."""


class Failed(BaseModel):
    """The request itself is unusable: bad input (``input``), a broken reference, or a protocol error."""

    kind: Literal["failed"] = "failed"
    id: int
    error: Literal["input", "reference", "protocol", "load"]
    message: str


Response = Annotated[Ready | Built | Evaluated | Failed, Field(discriminator="kind")]

REQUEST: TypeAdapter[BuildRequest | EvaluateRequest | ShutdownRequest] = TypeAdapter(Request)
RESPONSE: TypeAdapter[Ready | Built | Evaluated | Failed] = TypeAdapter(Response)
