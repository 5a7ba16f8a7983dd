"""``evoteam.toml``: the kernel tasks of a repository, and loading their definition, workloads and baseline."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    Language,
    LaunchSpec,
    Solution,
    SourceFile,
    Trace,
    Workload,
)
from evoteam.gpu_bench.verify.compare import ToleranceRule
from evoteam.gpu_bench.verify.reference import reference_solution

CONFIG_NAME = "evoteam.toml"
_M = TypeVar("_M", bound=BaseModel)


class TaskError(ValueError):
    """A task, definition, workload or solution file is missing or invalid; the message names it."""


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    atol: float = Field(default=1e-2, ge=0)
    rtol: float = Field(default=1e-2, ge=0)
    rule: ToleranceRule = "flashinfer"
    """How atol and rtol combine (``verify/compare.py``): ``flashinfer`` fails an element only when its error
    is over atol AND over rtol times the reference; ``allclose`` (torch.allclose, KernelBench's check) when it
    is over atol + rtol times the reference."""
    matched_ratio: float | None = Field(default=None, gt=0, le=1)
    """The share of an output's elements that must be within tolerance (FlashInfer-Bench's
    ``required_matched_ratio``; None: every element)."""


class KernelTask(BaseModel):
    """One ``[[kernel]]`` entry; relative paths are relative to the evoteam.toml that holds it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    source: Path
    language: Language
    binding: Binding | None = None
    entry: str = Field(min_length=1, description="the exported symbol in source")
    definition: Path
    workloads: Path
    baseline: str = "reference"
    """``reference`` (the definition's run), ``source`` (the file as it is now), ``kernel:NAME`` (another
    kernel's source in the same evoteam.toml) or a solution JSON path."""
    target: str = "cpu"
    """``cpu``, or the CUDA architecture to build for (``sm_90a``, ``sm_100a``, ...)."""
    flags: list[str] | None = None
    extra_sources: list[Path] = Field(default_factory=list)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    blobs: Path | None = None
    """Root that safetensors input paths are relative to (default: the dataset root above workloads/)."""
    constraints: Constraints = Field(default_factory=Constraints)
    """Checked on the generated PTX/SASS and ptxas resources of every CUDA candidate (violated: REJECTED)."""
    launch: LaunchSpec | None = None
    """Grid/block expressions for the ``pycuda`` binding."""
    knobs: dict[str, list[int | str]] = Field(default_factory=dict)
    """Tunable parameters and their candidate values (``BLOCK = [64, 128, 256]``) for the offline tuner,
    on top of those it finds in the source."""
    model: str | None = Field(default=None, min_length=1)
    """The model of the agents and the supervisor in this kernel's runs (``--model`` and the editor's
    ``evoteam.model`` win; without any, the backend's default)."""
    root: Path = Field(default=Path(), exclude=True)

    @model_validator(mode="after")
    def _resolve(self) -> KernelTask:
        for name in ("source", "definition", "workloads", "blobs"):
            value = getattr(self, name)
            if value is not None and not value.is_absolute():
                setattr(self, name, self.root / value)
        self.extra_sources = [p if p.is_absolute() else self.root / p for p in self.extra_sources]
        return self

    def load_definition(self) -> Definition:
        return load_definition(self.definition)

    def load_workloads(self) -> list[Workload]:
        return load_workloads(self.workloads)

    def source_solution(self, definition: Definition) -> Solution:
        """The task's source file as it is now, as a solution."""
        files = [self.source, *self.extra_sources]
        sources = []
        for path in files:
            try:
                sources.append(SourceFile(path=path.name, content=path.read_text()))
            except OSError as exc:
                raise TaskError(f"kernel {self.name}: cannot read {path}: {exc.strerror}") from None
        return Solution(
            name=f"{self.name}", definition=definition.name, author="user", spec=self.build_spec(), sources=sources
        )

    def build_spec(self, entry_file: str | None = None) -> BuildSpec:
        """How this task's sources build and are called; ``entry_file`` names another file holding the entry."""
        return BuildSpec(
            language=self.language,
            target_hardware=[self.target],
            entry_point=f"{entry_file or self.source.name}::{self.entry}",
            binding=self.binding,
            compile_flags=self.flags,
            launch=self.launch,
        )

    def baseline_solution(self, definition: Definition) -> Solution:
        if self.baseline == "reference":
            return reference_solution(definition, self.target)
        if self.baseline == "source":
            return self.source_solution(definition)
        if self.baseline.startswith("kernel:"):
            other = find_task(self.baseline.removeprefix("kernel:"), self.root)
            return other.source_solution(definition).model_copy(update={"name": other.name})
        path = Path(self.baseline)
        return load_solution(path if path.is_absolute() else self.root / path)

    def blob_root(self) -> Path:
        return self.blobs if self.blobs is not None else dataset_root(self.workloads)


class TaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel: list[KernelTask] = Field(default_factory=list)


def dataset_root(workloads: Path) -> Path:
    """``<root>/workloads/<op>/<name>.jsonl`` → ``<root>``; otherwise the workloads file's folder."""
    parents = workloads.resolve().parents
    for parent in parents:
        if parent.name == "workloads":
            return parent.parent
    return workloads.resolve().parent


def find_config(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_tasks(config: Path) -> list[KernelTask]:
    try:
        data = tomllib.loads(config.read_text())
    except OSError as exc:
        raise TaskError(f"cannot read {config}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{config} is not valid TOML: {exc}") from None
    for entry in data.get("kernel", []):
        if isinstance(entry, dict):
            entry["root"] = config.parent
    try:
        return TaskFile.model_validate(data).kernel
    except ValidationError as exc:
        raise TaskError(f"{config}: {_first_error(exc)}") from None


def find_task(name: str, start: Path) -> KernelTask:
    config = find_config(start)
    if config is None:
        raise TaskError(f"no {CONFIG_NAME} in {start} or any folder above it")
    tasks = load_tasks(config)
    for task in tasks:
        if task.name == name:
            return task
    known = ", ".join(t.name for t in tasks) or "none"
    raise TaskError(f"{config} has no kernel named {name!r} (kernels: {known})")


def _read_json(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise TaskError(f"{what} file not found: {path}") from None
    except OSError as exc:
        raise TaskError(f"cannot read {what} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise TaskError(f"{what} {path} is not valid JSON: {exc}") from None


def _load_model(path: Path, model: type[_M], what: str) -> _M:
    data = _read_json(path, what)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise TaskError(f"{what} {path}: {_first_error(exc)}") from None


def load_definition(path: Path) -> Definition:
    return _load_model(path, Definition, "definition")


def load_solution(path: Path) -> Solution:
    return _load_model(path, Solution, "solution")


def load_workloads(path: Path) -> list[Workload]:
    """Reads a JSONL of workload traces (FlashInfer-Bench layout) or of bare workloads."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise TaskError(f"workloads file not found: {path}") from None
    except OSError as exc:
        raise TaskError(f"cannot read workloads {path}: {exc.strerror}") from None
    workloads = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"workloads {path}:{number} is not valid JSON: {exc}") from None
        try:
            if isinstance(data, dict) and "workload" in data:
                workloads.append(Trace.model_validate(data).workload)
            else:
                workloads.append(Workload.model_validate(data))
        except ValidationError as exc:
            raise TaskError(f"workloads {path}:{number}: {_first_error(exc)}") from None
    if not workloads:
        raise TaskError(f"workloads file {path} holds no workload")
    return workloads


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"
