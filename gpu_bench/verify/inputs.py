"""Builds the input values of one workload trial: seeded random tensors, scalars, safetensors blobs, values
the definition's reference generates; and perturbed copies of a workload's fixed (blob) values."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.schema import (
    Definition,
    FillInput,
    GeneratedInput,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Workload,
)

Value = torch.Tensor | int | float | bool


class InputError(ValueError):
    """The workload cannot be turned into inputs (missing blob, missing axis, wrong tensor)."""


def make_inputs(
    definition: Definition, workload: Workload, seed: int, blob_root: Path | None, device: str = "cpu"
) -> dict[str, Value]:
    """Inputs in definition order. Random tensors depend only on ``seed`` (and the device: they are generated
    where they are used, so a GPU task's large inputs never cross the host); blobs are read from
    ``blob_root``. Random scalars always come from the CPU generator."""
    try:
        axes = definition.axis_values(workload.axes)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    generator = torch.Generator(device="cpu").manual_seed(seed)
    on_device = generator if device == "cpu" else torch.Generator(device=device).manual_seed(seed)
    generated = (
        _generated(definition, seed, device)
        if any(isinstance(s, GeneratedInput) for s in workload.inputs.values())
        else {}
    )
    values: dict[str, Value] = {}
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name, RandomInput())
        shape = definition.shape_of(spec, axes)
        dtype = torch_dtype(spec.dtype)
        if isinstance(source, GeneratedInput):
            value = _checked(name, generated[name], shape, dtype, definition.name)
            values[name] = value.to(device) if isinstance(value, torch.Tensor) else value
        elif isinstance(source, ScalarInput):
            values[name] = source.value
        elif isinstance(source, SafetensorsInput):
            values[name] = _load_blob(name, source, blob_root, workload.uuid).to(device)
        elif isinstance(source, FillInput):
            values[name] = filled(shape or (), dtype, source.value, generator, name).to(device)
        elif shape is None:
            values[name] = _random_scalar(dtype, generator)
        else:
            values[name] = _random_tensor(shape, dtype, on_device)
    unknown = set(workload.inputs) - set(definition.inputs)
    if unknown:
        raise InputError(f"workload {workload.uuid} names inputs {sorted(unknown)} not in {definition.name}")
    return values


GENERATOR = "trial_inputs"
"""The module-level function of a definition's reference that makes its ``generated`` inputs."""
_generators: dict[str, Callable[..., Any]] = {}


def _generated(definition: Definition, seed: int, device: str) -> dict[str, Any]:
    """``trial_inputs(seed, device)`` of the definition's reference (compiled once per reference text), by
    input name."""
    key = hashlib.sha256(definition.reference.encode()).hexdigest()
    if key not in _generators:
        namespace: dict[str, Any] = {"__name__": f"evoteam_inputs_{definition.name}"}
        try:
            exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), namespace)
        except Exception as exc:
            raise InputError(f"{definition.name}'s reference does not load: {type(exc).__name__}: {exc}") from None
        function = namespace.get(GENERATOR)
        if not callable(function):
            raise InputError(
                f"{definition.name} has generated inputs, but its reference defines no {GENERATOR}(seed, device)"
            )
        _generators[key] = function
    try:
        produced = _generators[key](seed, device)
    except Exception as exc:
        raise InputError(f"{definition.name}'s {GENERATOR}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(produced, list | tuple) or len(produced) != len(definition.inputs):
        raise InputError(
            f"{definition.name}'s {GENERATOR}() must return {len(definition.inputs)} values in definition order"
        )
    return dict(zip(definition.inputs, produced, strict=True))


def _checked(name: str, value: object, shape: tuple[int, ...] | None, dtype: torch.dtype, definition: str) -> Value:
    """A generated value, if it is what the definition declares (a tensor of its shape and dtype, or a scalar)."""
    if shape is None:
        if isinstance(value, bool | int | float):
            return value
        raise InputError(f"{definition}: generated input {name!r} is a {type(value).__name__}, not a scalar")
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape or value.dtype != dtype:
        got = f"{tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else type(value).__name__
        raise InputError(f"{definition}: generated input {name!r} is {got}; the definition declares {shape} {dtype}")
    return value


PERTURBATION = 2.0**-6
"""The largest relative change of a fixed value in a perturbed copy."""


def perturbed(workload: Workload, inputs: Mapping[str, Value], seed: int) -> dict[str, Value] | None:
    """A copy of ``inputs`` whose floating-point tensors read from blobs (a dataset's fixed values, which a
    candidate could carry answers for) are each scaled element-wise by ``1 + u``, ``|u| <= 2**-6``; None when
    the workload has no such input. Integer tensors (indices, lengths) and scalars are never changed."""
    fixed = {name for name, source in workload.inputs.items() if isinstance(source, SafetensorsInput)}
    return perturbed_values(inputs, seed, fixed)


def perturbed_values(inputs: Mapping[str, Value], seed: int, only: set[str] | None = None) -> dict[str, Value] | None:
    """A copy of ``inputs`` with every floating-point tensor (of ``only``, when given) scaled element-wise by
    ``1 + u``, ``|u| <= 2**-6``: values nobody has seen, with the same shapes, indices and lengths (the same
    work, where work depends on the data); None when there is no such tensor."""
    names = [
        name
        for name, value in inputs.items()
        if (only is None or name in only) and isinstance(value, torch.Tensor) and value.dtype.is_floating_point
    ]
    if not names:
        return None
    generator = torch.Generator().manual_seed(seed)
    copy = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    for name in names:
        tensor = copy[name]
        assert isinstance(tensor, torch.Tensor)
        scale = 1.0 + (torch.rand(tensor.shape, generator=generator, dtype=torch.float64) * 2 - 1) * PERTURBATION
        copy[name] = (tensor.double() * scale.to(tensor.device)).to(tensor.dtype)
    return copy


def filled(
    shape: tuple[int, ...], dtype: torch.dtype, fill: str, generator: torch.Generator, name: str
) -> torch.Tensor:
    """A tensor of ``fill`` values (``FillInput``); NaN and infinities only exist for floating-point dtypes."""
    floating = dtype.is_floating_point
    if fill in ("nan", "inf", "-inf", "tiny", "specials") and not floating:
        raise InputError(f"input {name!r} is {dtype}: {fill!r} needs a floating-point input")
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if fill == "ones":
        return torch.ones(shape, dtype=dtype)
    if fill == "large":
        top = torch.finfo(dtype).max if floating else torch.iinfo(dtype).max
        return torch.full(shape, top / 2 if floating else top, dtype=dtype)
    if fill == "tiny":
        return torch.full(shape, torch.finfo(dtype).tiny, dtype=dtype)
    if fill in ("nan", "inf", "-inf"):
        return torch.full(shape, float(fill), dtype=dtype)
    values = torch.randn(shape, generator=generator, dtype=torch.float32)  # specials
    flat = values.view(-1)
    if flat.numel():
        picks = torch.randint(0, flat.numel(), (max(1, flat.numel() // 16),), generator=generator)
        special = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0], dtype=torch.float32)
        flat[picks] = special[torch.arange(picks.numel()) % special.numel()]
    return values.to(dtype)


def _random_tensor(shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """On the generator's device."""
    device = generator.device
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float32, device=device).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator, device=device).to(torch.bool)
    high = 128 if dtype in (torch.int8, torch.uint8) else 1024
    return torch.randint(0, high, shape, generator=generator, dtype=torch.int64, device=device).to(dtype)


def _random_scalar(dtype: torch.dtype, generator: torch.Generator) -> int | float:
    if dtype.is_floating_point:
        return float(torch.rand((), generator=generator))
    return int(torch.randint(1, 64, (), generator=generator))


def _load_blob(name: str, source: SafetensorsInput, root: Path | None, uuid: str) -> torch.Tensor:
    from safetensors.torch import load_file

    path = (root / source.path) if root is not None else Path(source.path)
    if not path.is_file():
        raise InputError(
            f"workload {uuid} input {name!r} needs safetensors blob {source.path} (key {source.tensor_key!r}), "
            f"which does not exist under {root if root is not None else Path.cwd()}"
        )
    tensors = load_file(str(path))
    if source.tensor_key not in tensors:
        raise InputError(f"safetensors blob {path} has no tensor {source.tensor_key!r} (input {name!r})")
    tensor: torch.Tensor = tensors[source.tensor_key]
    return tensor
