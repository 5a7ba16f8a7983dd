"""What a KernelBench problem's values become in a definition: input and output names, one constant axis per
dimension, dtypes, and whether a float input may be drawn afresh by the evaluator. Pure functions on torch
values; nothing here runs the problem.
"""

from __future__ import annotations

import inspect
import keyword
import math

import torch

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.schema import AxisConst, DType

RANDN_MIN_VALUES = 256
"""Below this many values a float input is always recorded: too few to tell torch.randn's from others."""
_SAMPLE = 1 << 20
"""At most this many values (evenly strided over the tensor) are looked at."""


def input_names(model: type[torch.nn.Module], count: int, reserved: frozenset[str]) -> list[str]:
    """``forward``'s parameter names when they fit (same count, usable as Python names, none of ``reserved``),
    else ``input_0``, ``input_1``, ..."""
    generic = [f"input_{i}" for i in range(count)]
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return generic
    names = [p.name for p in params]
    plain = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    usable = all(n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_") for n in names)
    if not plain or not usable or len(names) != count or set(names) & reserved:
        return generic
    return names


def output_names(count: int, taken: list[str]) -> list[str]:
    """``output`` (one output) or ``output_0``, ``output_1``, ...; an underscore appended past an input name."""
    names = ["output"] if count == 1 else [f"output_{i}" for i in range(count)]
    out = []
    for n in names:
        while n in taken:
            n += "_"
        out.append(n)
    return out


def const_axes(
    tensors: list[tuple[str, torch.Tensor]], sizes: dict[str, int]
) -> tuple[dict[str, AxisConst], dict[str, list[str]]]:
    """One constant axis per dimension, named after the module constant of that size when exactly one has it
    (else ``<tensor>_dim<i>``); the axes and each tensor's shape as axis names."""
    by_value: dict[int, list[str]] = {}
    for n, v in sizes.items():
        by_value.setdefault(v, []).append(n)
    axes: dict[str, AxisConst] = {}
    shapes: dict[str, list[str]] = {}
    for tensor, value in tensors:
        dims = []
        for i, size in enumerate(value.shape):
            owners = by_value.get(size, [])
            named = len(owners) == 1
            axis = owners[0] if named else f"{tensor}_dim{i}"
            while axis in axes and axes[axis].value != size:
                axis += "_"
            if axis not in axes:
                description = f"module constant {axis}" if named and axis == owners[0] else None
                axes[axis] = AxisConst(type="const", value=size, description=description)
            dims.append(axis)
        shapes[tensor] = dims
    return axes, shapes


def not_like_randn(value: torch.Tensor) -> str | None:
    """Why ``value`` cannot be ``torch.randn``'s (then it must be recorded, not drawn afresh), or None.

    A draw of torch.randn has a mean within 6 standard errors of 0, a standard deviation near 1 and no value
    repeated much, and is no symmetric matrix; ``torch.rand`` (mean 0.5), a softmax (mean 1/n), ``torch.tril``
    (half zeros), labels of ±1, scaled or shifted normals all fail one of these.
    """
    n = value.numel()
    if n < RANDN_MIN_VALUES:
        return f"it has {n} values (under {RANDN_MIN_VALUES}, too few to tell)"
    x = value.detach().flatten()[:: max(1, n // _SAMPLE)].to(torch.float64)
    if not bool(x.isfinite().all()):
        return "it holds NaN or inf"
    mean, std, count = float(x.mean()), float(x.std()), x.numel()
    if abs(mean) > 6 / math.sqrt(count) or abs(std - 1) > max(0.05, 6 / math.sqrt(2 * count)):
        return f"its mean is {mean:.3g} and its standard deviation {std:.3g}, not torch.randn's 0 and 1"
    _, repeats = torch.unique(x, return_counts=True)
    top = int(repeats.max())
    if top > max(8, count // 100):
        return f"one value fills {top} of {count} places"
    if value.dim() >= 2 and value.shape[-1] == value.shape[-2] and torch.equal(value, value.transpose(-1, -2)):
        return "it is symmetric"
    return None


def dtype_of(value: torch.Tensor) -> DType | None:
    """The definition dtype of ``value`` (the first spelling wins: float8_e4m3fn before float8_e4m3)."""
    for dtype in DType:
        try:
            if torch_dtype(dtype) == value.dtype:
                return dtype
        except ValueError:  # a dtype this torch lacks
            continue
    return None


def scalar_dtype(value: bool | int | float) -> DType:
    if isinstance(value, bool):
        return DType.BOOL
    return DType.INT64 if isinstance(value, int) else DType.FLOAT64


def describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"
