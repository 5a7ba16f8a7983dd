"""FlashInfer-Bench ``Definition``: axes, input/output tensor specs and the Python reference."""

from __future__ import annotations

import ast
from enum import StrEnum
from typing import Literal

from pydantic import NonNegativeInt, model_validator

from evoteam.gpu_bench.schema._base import Model, NonEmptyStr


class DType(StrEnum):
    """Element types, spelled as FlashInfer-Bench spells them."""

    FLOAT64 = "float64"
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E4M3 = "float8_e4m3"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    UINT8 = "uint8"
    BOOL = "bool"


class AxisConst(Model):
    """An axis whose size is fixed by the definition."""

    type: Literal["const"] = "const"
    value: NonNegativeInt
    description: str | None = None


class AxisVar(Model):
    """An axis whose size each workload sets."""

    type: Literal["var"] = "var"
    description: str | None = None


Axis = AxisConst | AxisVar


class TensorSpec(Model):
    """One input or output: a shape given by axis names (``None`` for a scalar) and a dtype."""

    shape: list[NonEmptyStr] | None
    dtype: DType
    description: str | None = None
    optional: bool | None = None


class Definition(Model):
    """What a kernel must compute, with a reference ``run`` in Python that is the ground truth."""

    name: NonEmptyStr
    op_type: NonEmptyStr
    axes: dict[NonEmptyStr, Axis]
    inputs: dict[NonEmptyStr, TensorSpec]
    outputs: dict[NonEmptyStr, TensorSpec]
    reference: NonEmptyStr
    tags: list[NonEmptyStr] | None = None
    description: str | None = None
    constraints: list[NonEmptyStr] | None = None

    @model_validator(mode="after")
    def _check(self) -> Definition:
        try:
            module = ast.parse(self.reference, mode="exec")
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc}") from exc
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in module.body):
            raise ValueError("reference must define a top-level function named 'run'")
        for text in self.constraints or []:
            try:
                ast.parse(text, mode="eval")
            except SyntaxError as exc:
                raise ValueError(f"constraint {text!r} is not a Python expression: {exc}") from exc
        for kind, specs in (("input", self.inputs), ("output", self.outputs)):
            for tensor, spec in specs.items():
                for axis in spec.shape or []:
                    if axis not in self.axes:
                        raise ValueError(f"{kind} {tensor!r} uses undefined axis {axis!r}")
        clash = set(self.inputs) & set(self.outputs)
        if clash:
            raise ValueError(f"names used for both inputs and outputs: {sorted(clash)}")
        return self

    def const_axes(self) -> dict[str, int]:
        return {n: a.value for n, a in self.axes.items() if isinstance(a, AxisConst)}

    def var_axes(self) -> list[str]:
        """Variable axes in the order of ``axes``: the order of trailing C ABI arguments."""
        return [n for n, a in self.axes.items() if isinstance(a, AxisVar)]

    def axis_values(self, var_values: dict[str, int]) -> dict[str, int]:
        """All axis sizes for one workload; a missing variable axis is a ``ValueError``."""
        missing = [n for n in self.var_axes() if n not in var_values]
        if missing:
            raise ValueError(f"workload does not set variable axes {missing} of {self.name}")
        unknown = [n for n in var_values if n not in self.axes]
        if unknown:
            raise ValueError(f"workload sets axes {unknown} that {self.name} does not define")
        return {**self.const_axes(), **{n: var_values[n] for n in self.var_axes()}}

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(axes[a] for a in spec.shape)
