"""Imports FlashInfer Trace definitions as evoteam tasks: files under one folder and ``[[kernel]]`` entries.

For each definition: ``definitions/<op>/<name>.json``, ``workloads/<op>/<name>.jsonl`` (the dataset's
workloads that fit the size limit, with missing blobs synthesized, or generated small ones when none are
left), their blobs under ``blob/``, a starting kernel under ``kernels/`` and a ``[[kernel]]`` in
``evoteam.toml`` (appended to an existing one) with ``baseline = "reference"``. Nothing is written unless
every file can be: a kernel name already in evoteam.toml or a different file already in place is an error.
"""

from __future__ import annotations

import fnmatch
import json
import math
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.interop.flashinfer.dataset import DatasetError, dataset_workloads, load_definitions, select
from evoteam.gpu_bench.interop.flashinfer.kernel import (
    KernelImportError,
    StartingKernel,
    reference_kernel,
    solution_kernel,
)
from evoteam.gpu_bench.interop.size_cap import SizeCap, default_cap
from evoteam.gpu_bench.interop.synth.axes import SynthesisError, workload_bytes
from evoteam.gpu_bench.interop.synth.workloads import (
    PreparedWorkload,
    complete_workload,
    generate_workloads,
    smallest_bytes,
)
from evoteam.gpu_bench.schema import Definition, Solution, Trace, Workload
from evoteam.gpu_bench.task import CONFIG_NAME, TaskError

MB = 1 << 20


class FlashInferImportError(ValueError):
    """The dataset, the options or the output folder do not allow the import; the message says why."""


class ImportOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    definitions: list[str] = Field(default_factory=list)
    """Names or shell patterns (``rmsnorm_*``); empty: every definition (or the solution's, with one)."""
    max_workloads: int | None = Field(default=None, ge=1)
    max_mb: float | None = Field(default=None, gt=0)
    """Workloads whose input and output tensors together exceed this many MiB are left out (None: the default
    cap from this machine's memory, ``interop/size_cap.py``; ``inf``: no cap)."""
    generate: int = Field(default=3, ge=1)
    """Workloads generated for a definition that has none (within the limits)."""
    target: str | None = None
    """``cpu`` (the default for references) or a CUDA architecture; a solution's own target otherwise."""
    solution: Solution | None = None


@dataclass
class ImportedKernel:
    name: str
    definition: Path
    workloads: Path
    source: Path
    workload_count: int
    dataset_workloads: int
    """How many came from the dataset (0: all were generated)."""
    synthetic_workloads: int
    dropped: list[str] = field(default_factory=list)
    """Why dataset workloads were left out (one line per workload)."""


@dataclass
class Skipped:
    name: str
    reason: str


@dataclass
class ImportReport:
    config: Path
    imported: list[ImportedKernel] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    cap: SizeCap | None = None
    """The default size cap used (None when ``max_mb`` was given, or memory could not be read)."""


@dataclass
class _Plan:
    definition: Definition
    workloads: list[PreparedWorkload]
    kernel: StartingKernel
    dropped: list[str]
    from_dataset: int


def import_flashinfer(dataset: Path, out: Path, options: ImportOptions) -> ImportReport:
    try:
        definitions = load_definitions(dataset)
    except DatasetError as exc:
        raise FlashInferImportError(str(exc)) from None
    chosen = _select(definitions, options)
    config = out / CONFIG_NAME
    existing = _existing_names(config)
    clash = [name for name in chosen if name in existing]
    if clash:
        raise FlashInferImportError(f"{config} already has kernels named {clash}; import into another --out")
    report = ImportReport(config=config)
    if options.max_mb is None:
        target = options.target or (options.solution.spec.target_hardware[0] if options.solution else "cpu")
        report.cap = default_cap(target)
        if report.cap is not None:
            options = options.model_copy(update={"max_mb": report.cap.mb})
    plans: list[_Plan] = []
    for name in chosen:
        try:
            plans.append(_plan(definitions[name][0], dataset, options))
        except SynthesisError as exc:
            report.skipped.append(Skipped(name, str(exc)))
        except KernelImportError as exc:
            raise FlashInferImportError(str(exc)) from None
    _write(dataset, out, plans, report)
    return report


def _select(definitions: dict[str, tuple[Definition, Path]], options: ImportOptions) -> list[str]:
    patterns = list(options.definitions)
    if options.solution is not None:
        wanted = options.solution.definition
        if wanted not in definitions:
            raise FlashInferImportError(f"the solution is for {wanted!r}, which the dataset does not define")
        if not patterns:
            patterns = [wanted]
        elif not any(fnmatch.fnmatchcase(wanted, p) for p in patterns):
            raise FlashInferImportError(f"the solution is for {wanted!r}, which no --definition selects")
    try:
        return select(list(definitions), patterns)
    except DatasetError as exc:
        raise FlashInferImportError(str(exc)) from None


def _existing_names(config: Path) -> set[str]:
    if not config.exists():
        return set()
    try:
        data = tomllib.loads(config.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FlashInferImportError(f"cannot read {config}: {exc}") from None
    kernels = data.get("kernel", [])
    return {k["name"] for k in kernels if isinstance(k, dict) and isinstance(k.get("name"), str)}


def _plan(definition: Definition, dataset: Path, options: ImportOptions) -> _Plan:
    for spec in [*definition.inputs.values(), *definition.outputs.values()]:
        try:
            torch_dtype(spec.dtype)
        except ValueError as exc:
            raise SynthesisError(str(exc)) from None
    max_bytes = int(options.max_mb * MB) if options.max_mb is not None and math.isfinite(options.max_mb) else None
    limit = options.max_workloads
    kept: list[PreparedWorkload] = []
    too_large: list[str] = []
    invalid: list[str] = []
    for workload in _dataset_workloads(definition, dataset):
        if limit is not None and len(kept) >= limit:
            break
        try:
            axes = definition.axis_values(workload.axes)
        except ValueError as exc:
            invalid.append(f"workload {workload.uuid}: {exc}")
            continue
        size = workload_bytes(definition, axes)
        if max_bytes is not None and size > max_bytes:
            shown = " ".join(f"{k}={v}" for k, v in workload.axes.items())
            too_large.append(
                f"workload {workload.uuid} ({shown}): {size / MB:.1f} MiB of tensors, over the "
                f"{options.max_mb:g} MiB limit"
            )
            continue
        try:
            kept.append(complete_workload(definition, workload, dataset))
        except SynthesisError as exc:
            invalid.append(f"workload {workload.uuid}: {exc}")
    dropped = too_large + invalid
    from_dataset = len(kept)
    if not kept:
        count = min(options.generate, limit) if limit is not None else options.generate
        kept = generate_workloads(definition, count, max_bytes)
    if not kept:
        need = smallest_bytes(definition) / MB
        raise SynthesisError(
            f"its smallest workload (variable axes at small values) needs {need:.1f} MiB of tensors, over the "
            f"{options.max_mb:g} MiB limit"
        )
    if options.solution is not None and options.solution.definition == definition.name:
        kernel = solution_kernel(options.solution, definition, options.target)
    else:
        kernel = reference_kernel(definition, options.target or "cpu")
    return _Plan(definition, kept, kernel, dropped, from_dataset)


def _dataset_workloads(definition: Definition, dataset: Path) -> list[Workload]:
    try:
        return dataset_workloads(definition, dataset)
    except TaskError as exc:
        raise SynthesisError(str(exc)) from None


def _write(dataset: Path, out: Path, plans: list[_Plan], report: ImportReport) -> None:
    texts: dict[Path, str] = {}
    blobs: dict[Path, bytes] = {}
    copies: dict[Path, Path] = {}
    entries: list[str] = []
    for plan in plans:
        d = plan.definition
        d_rel = f"definitions/{d.op_type}/{d.name}.json"
        w_rel = f"workloads/{d.op_type}/{d.name}.jsonl"
        texts[out / d_rel] = json.dumps(d.to_json_dict(), indent=2) + "\n"
        texts[out / w_rel] = "".join(
            Trace(definition=d.name, workload=p.workload, solution=None, evaluation=None).to_json() + "\n"
            for p in plan.workloads
        )
        for rel, content in plan.kernel.files.items():
            texts[out / rel] = content
        for p in plan.workloads:
            if p.blob and p.blob_path is not None:
                blobs[out / p.blob_path] = _blob_bytes(p)
            for rel in p.copies:
                copies[out / rel] = dataset / rel
        synthetic = sum(1 for p in plan.workloads if p.synthetic)
        entries.append(_toml_entry(plan, d_rel, w_rel, synthetic))
        report.imported.append(
            ImportedKernel(
                name=d.name,
                definition=out / d_rel,
                workloads=out / w_rel,
                source=out / plan.kernel.source,
                workload_count=len(plan.workloads),
                dataset_workloads=plan.from_dataset,
                synthetic_workloads=synthetic,
                dropped=plan.dropped,
            )
        )
    for path, text in texts.items():
        _refuse_overwrite(path, text.encode())
    for path, data in blobs.items():
        _refuse_overwrite(path, data)
    for path, source in copies.items():
        if path.resolve() != source.resolve():
            _refuse_overwrite(path, source.read_bytes())
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path, data in blobs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for path, source in copies.items():
        if path.resolve() != source.resolve():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, path)
    if entries:
        _append_config(report.config, entries)


def _blob_bytes(prepared: PreparedWorkload) -> bytes:
    from safetensors.torch import save

    data: bytes = save({k: v.contiguous() for k, v in prepared.blob.items()})
    return data


def _refuse_overwrite(path: Path, content: bytes) -> None:
    if path.exists() and (not path.is_file() or path.read_bytes() != content):
        raise FlashInferImportError(f"{path} already exists with other content; remove it or import into another --out")


def _toml_entry(plan: _Plan, definition: str, workloads: str, synthetic: int) -> str:
    k = plan.kernel
    d = plan.definition
    lines = [
        f"# FlashInfer Trace {d.op_type}/{d.name}: {len(plan.workloads)} workloads, {synthetic} synthetic "
        "(uuid 'synthetic-...': inputs made by evoteam)",
        "[[kernel]]",
        f"name = {_q(d.name)}",
        f"source = {_q(k.source)}",
        f"language = {_q(k.language.value)}",
        f"binding = {_q(k.binding.value)}",
        f"entry = {_q(k.entry)}",
        f"definition = {_q(definition)}",
        f"workloads = {_q(workloads)}",
        'baseline = "reference"',
        f"target = {_q(k.target)}",
    ]
    ratio = matched_ratio(d)
    if ratio is not None:
        lines.append(f"tolerance = {{ atol = 1e-2, rtol = 1e-2, matched_ratio = {ratio} }}")
    if k.extra_sources:
        lines.append(f"extra_sources = {json.dumps(k.extra_sources)}")
    if k.flags is not None:
        lines.append(f"flags = {json.dumps(k.flags)}")
    if k.launch is not None:
        lines += [
            "",
            "[kernel.launch]",
            f"grid = {json.dumps(k.launch.grid)}",
            f"block = {json.dumps(k.launch.block)}",
            f"shared_bytes = {_q(k.launch.shared_bytes)}",
        ]
    return "\n".join(lines) + "\n"


LOW_BIT_MATCHED_RATIO = 0.95
"""The share of output elements FlashInfer-Bench's low-bit evaluator requires within tolerance."""


def matched_ratio(definition: Definition) -> float | None:
    """FlashInfer-Bench's ``required_matched_ratio`` for ``definition``: its low-bit evaluator (definitions
    named ``...moe_fp8_block_scale...``) passes an output when 95% of its elements are within tolerance; every
    other evaluator wants all of them (None)."""
    return LOW_BIT_MATCHED_RATIO if "moe_fp8_block_scale" in definition.name else None


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def _append_config(config: Path, entries: list[str]) -> None:
    old = config.read_text() if config.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(old + ("\n" if old else "") + "\n".join(entries))
