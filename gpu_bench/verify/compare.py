"""Output checks in FlashInfer-Bench's order: shape, dtype, non-finite values, then tolerance.

Under the ``flashinfer`` rule (the default) an element fails only if ``|out - ref| > atol`` AND
``|out - ref| > rtol * |ref|``; under ``allclose`` (torch.allclose, which KernelBench uses) if
``|out - ref| > atol + rtol * |ref|``, a looser check for the same atol and rtol (a bound up to twice as wide).
With ``matched_ratio`` (FlashInfer-Bench's ``required_matched_ratio``, which it sets to 0.95 for its low-bit
MoE definitions) an output fails only when fewer than that share of its elements are within tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from evoteam.gpu_bench.schema import EvaluationStatus

ToleranceRule = Literal["flashinfer", "allclose"]


@dataclass(frozen=True)
class Mismatch:
    status: EvaluationStatus
    reason: str
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0


@dataclass(frozen=True)
class Errors:
    max_absolute_error: float
    max_relative_error: float


def compare(
    name: str,
    out: object,
    ref: torch.Tensor,
    atol: float,
    rtol: float,
    rule: ToleranceRule = "flashinfer",
    matched_ratio: float | None = None,
) -> Mismatch | Errors:
    """Checks one output against the reference; returns the errors, or why it failed."""
    if not isinstance(out, torch.Tensor):
        return Mismatch(EvaluationStatus.INCORRECT_SHAPE, f"output {name!r} is {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Mismatch(
            EvaluationStatus.INCORRECT_SHAPE,
            f"output {name!r} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
        )
    if out.dtype != ref.dtype:
        return Mismatch(
            EvaluationStatus.INCORRECT_DTYPE, f"output {name!r} has dtype {out.dtype}, expected {ref.dtype}"
        )
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    ref_finite = torch.isfinite(r)
    bad_nonfinite = (~torch.isfinite(o)) & ref_finite
    same_special = (~ref_finite) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
    wrong_special = (~ref_finite) & ~same_special
    diff = torch.where(ref_finite & torch.isfinite(o), (o - r).abs(), torch.zeros_like(o))
    rel = diff / r.abs().clamp_min(torch.finfo(torch.float64).tiny)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float(torch.where(diff > 0, rel, torch.zeros_like(rel)).max()) if diff.numel() else 0.0
    count = int(bad_nonfinite.sum())
    if count:
        first = _index(bad_nonfinite)
        return Mismatch(
            EvaluationStatus.INCORRECT_NUMERICAL,
            f"output {name!r} has {count} non-finite value(s) where the reference is finite (first at {first}); "
            "outputs start as NaN, so this is often an element the kernel never wrote",
            float("nan"),
            float("nan"),
        )
    if int(wrong_special.sum()):
        return Mismatch(
            EvaluationStatus.INCORRECT_NUMERICAL,
            f"output {name!r} differs where the reference is NaN/inf (first at {_index(wrong_special)})",
            max_abs,
            max_rel,
        )
    fails = diff > atol + rtol * r.abs() if rule == "allclose" else (diff > atol) & (diff > rtol * r.abs())
    n_fail = int(fails.sum())
    matched = 1.0 - n_fail / max(1, o.numel())
    if n_fail and matched_ratio is not None and matched >= matched_ratio:
        return Errors(max_abs, max_rel)
    if n_fail:
        idx = _index(fails)
        return Mismatch(
            EvaluationStatus.INCORRECT_NUMERICAL,
            f"output {name!r}: {n_fail} of {o.numel()} element(s) outside {_BOUND[rule]} "
            f"(atol={atol:g}, rtol={rtol:g}){_ratio(matched, matched_ratio)}; "
            f"first at {idx}: got {float(o[idx]):.6g}, expected {float(r[idx]):.6g}",
            max_abs,
            max_rel,
        )
    return Errors(max_abs, max_rel)


def _ratio(matched: float, required: float | None) -> str:
    return "" if required is None else f", {matched:.2%} matched where {required:.0%} must"


_BOUND = {"flashinfer": "atol and rtol", "allclose": "atol + rtol * |expected|"}


def _index(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])
