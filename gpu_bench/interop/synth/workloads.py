"""Workloads with synthesized inputs, marked ``synthetic`` in their uuid, with the blob that holds them.

A dataset workload whose safetensors blobs are missing keeps its axes and its other inputs; the missing
inputs (and those coupled to them) are synthesized (``synth_inputs``) into one new safetensors blob, and its
uuid becomes ``synthetic-<original uuid>``. A definition without workloads gets generated ones
(``synthetic-<uuid5 of definition and axes>``) at small axis values (``synth_axes``). The prefix survives in
every trace, so results on synthetic inputs are recognizable and the original uuid is recoverable.
Blobs follow FlashInfer-Bench's layout: ``blob/workloads/<op_type>/<definition>/<definition>_<uuid>.safetensors``
relative to the dataset root.
"""

from __future__ import annotations

import hashlib
import math
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.interop.synth.axes import SynthesisError, check_constraints, small_axes, workload_bytes
from evoteam.gpu_bench.interop.synth.inputs import has_rule, synthesize_inputs
from evoteam.gpu_bench.schema import Definition, RandomInput, SafetensorsInput, ScalarInput, Workload
from evoteam.gpu_bench.schema.workload import InputSpec

SYNTHETIC_PREFIX = "synthetic-"
_NAMESPACE = uuidlib.UUID("6f1c2b1e-5d0a-4c47-9a57-1d3e0f9b7c21")


@dataclass
class PreparedWorkload:
    """A workload ready to write: ``blob`` (if not empty) must be saved at ``blob_path`` under the dataset
    root; ``copies`` are existing blobs (paths relative to the source dataset) it still reads."""

    workload: Workload
    blob: dict[str, torch.Tensor] = field(default_factory=dict)
    blob_path: str | None = None
    copies: list[str] = field(default_factory=list)

    @property
    def synthetic(self) -> bool:
        return is_synthetic(self.workload)


def is_synthetic(workload: Workload) -> bool:
    """Whether some of the workload's inputs (or the whole workload) were synthesized by evoteam."""
    return workload.uuid.startswith(SYNTHETIC_PREFIX)


def original_uuid(workload: Workload) -> str:
    """The dataset's uuid of a workload whose missing inputs were synthesized (the uuid itself otherwise)."""
    return workload.uuid.removeprefix(SYNTHETIC_PREFIX)


def blob_relpath(definition: Definition, uuid: str) -> str:
    return f"blob/workloads/{definition.op_type}/{definition.name}/{definition.name}_{uuid}.safetensors"


def complete_workload(definition: Definition, workload: Workload, dataset_root: Path) -> PreparedWorkload:
    """The workload with its missing safetensors inputs synthesized (unchanged when every blob exists)."""
    missing: set[str] = set()
    present: list[str] = []
    for name, source in workload.inputs.items():
        if isinstance(source, SafetensorsInput):
            if (dataset_root / source.path).is_file():
                present.append(source.path)
            else:
                missing.add(name)
    if not missing:
        return PreparedWorkload(workload=workload, copies=sorted(set(present)))
    axes = _all_axes(definition, workload.axes)
    new_uuid = SYNTHETIC_PREFIX + workload.uuid
    tensors = synthesize_inputs(definition, axes, missing, _seed(new_uuid))
    _check(definition, axes, tensors, workload.inputs)
    path = blob_relpath(definition, new_uuid)
    inputs: dict[str, InputSpec] = dict(workload.inputs)
    for name in tensors:
        inputs[name] = SafetensorsInput(type="safetensors", path=f"./{path}", tensor_key=name)
    still_read = {s.path for s in inputs.values() if isinstance(s, SafetensorsInput) and s.path in present}
    done = Workload(uuid=new_uuid, axes=workload.axes, inputs=inputs)
    return PreparedWorkload(workload=done, blob=tensors, blob_path=path, copies=sorted(still_read))


def generate_workloads(definition: Definition, count: int = 3, max_bytes: int | None = None) -> list[PreparedWorkload]:
    """Up to ``count`` small workloads (axes at 1x, 2x, 4x ... the small defaults) that fit ``max_bytes``."""
    out: list[PreparedWorkload] = []
    seen: set[str] = set()
    for i in range(count):
        var = small_axes(definition, scale=2**i)
        axes = _all_axes(definition, var)
        if max_bytes is not None and workload_bytes(definition, axes) > max_bytes:
            break
        key = ",".join(f"{k}={v}" for k, v in sorted(var.items()))
        if key in seen:
            continue
        seen.add(key)
        uuid = SYNTHETIC_PREFIX + str(uuidlib.uuid5(_NAMESPACE, f"{definition.name}:{key}"))
        wanted = {n for n, s in definition.inputs.items() if s.shape is not None and has_rule(n)}
        tensors = synthesize_inputs(definition, axes, wanted, _seed(uuid)) if wanted else {}
        inputs: dict[str, InputSpec] = {}
        path = blob_relpath(definition, uuid) if tensors else None
        for name, spec in definition.inputs.items():
            if name in tensors and path is not None:
                inputs[name] = SafetensorsInput(type="safetensors", path=f"./{path}", tensor_key=name)
            elif spec.shape is None:
                inputs[name] = ScalarInput(type="scalar", value=_scalar_value(definition, name))
            else:
                inputs[name] = RandomInput(type="random")
        _check(definition, axes, tensors, inputs)
        out.append(PreparedWorkload(Workload(uuid=uuid, axes=var, inputs=inputs), tensors, path))
    return out


def smallest_bytes(definition: Definition) -> int:
    """Bytes of the smallest workload ``generate_workloads`` would make."""
    return workload_bytes(definition, _all_axes(definition, small_axes(definition)))


def _scalar_value(definition: Definition, name: str) -> bool | int | float:
    """A plausible value for a scalar input of a generated workload (softmax scales: 1/sqrt(head dim))."""
    dtype = torch_dtype(definition.inputs[name].dtype)
    if dtype == torch.bool:
        return False
    if not dtype.is_floating_point:
        return 0  # offsets and counts: the neutral choice
    if "scale" in name and "scaling" not in name:
        dims = [v for a, v in definition.const_axes().items() if a.startswith(("head_dim", "head_size", "qk_dim"))]
        return 1.0 / math.sqrt(dims[0]) if dims else 1.0
    return 1.0


def _all_axes(definition: Definition, var_values: dict[str, int]) -> dict[str, int]:
    try:
        return definition.axis_values(var_values)
    except ValueError as exc:
        raise SynthesisError(str(exc)) from None


def _check(
    definition: Definition, axes: dict[str, int], tensors: dict[str, torch.Tensor], inputs: dict[str, InputSpec]
) -> None:
    """Every constraint that can be evaluated holds: real values for synthesized tensors, shapes for others."""
    namespace: dict[str, object] = dict(axes)
    for name, spec in definition.inputs.items():
        shape = definition.shape_of(spec, axes)
        source = inputs.get(name)
        if name in tensors:
            namespace[name] = tensors[name]
        elif isinstance(source, ScalarInput):
            namespace[name] = source.value
        elif shape is not None:
            namespace[name] = torch.empty(shape, dtype=torch_dtype(spec.dtype), device="meta")
    failed = check_constraints(definition, namespace)
    if failed:
        raise SynthesisError(f"{definition.name}: synthesized inputs break constraints {failed} (axes {axes})")


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "little")
