"""Sampling definitions are checked statistically, as FlashInfer-Bench's sampling evaluator checks them.

A definition of op_type ``sampling`` (``top_k_sampling_from_probs``, ``top_p_...``, ``top_k_top_p_...``) draws
token ids from ``probs`` after top-k and/or top-p filtering: two correct kernels give different samples, so
outputs cannot be compared element by element. Instead:

1. every sample must be a token the filtering keeps (one the reference can draw, or one FlashInfer-Bench's
   valid mask allows: at least as likely as the k-th largest, ties included, and within the nucleus with 0.05
   of slack on top-p), in every correctness trial and every verified timed call;
2. the distribution of many samples must be close to the filtered distribution: the largest total variation
   distance over the rows at most 0.2 (FlashInfer-Bench's ``sampling_tvd_threshold``). evoteam compares with
   the distribution the reference samples from (top-k, renormalized, then top-p, as the definitions' references
   do), not FlashInfer-Bench's slack mask, so an honest sampler is not pushed towards the limit by the slack.

The filtering method comes from the definition's name, as in FlashInfer-Bench (``top_k_top_p``, ``top_k``,
``top_p``, else none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from evoteam.gpu_bench.schema import Definition, EvaluationStatus
from evoteam.gpu_bench.verify.compare import Errors, Mismatch
from evoteam.gpu_bench.verify.inputs import Value

TVD_LIMIT = 0.2
"""FlashInfer-Bench's ``sampling_tvd_threshold``."""
TOP_P_SLACK = 5e-2
"""FlashInfer-Bench's ``eps`` on the nucleus boundary of the valid mask."""
MIN_SAMPLES = 256
MAX_SAMPLES = 8192
SAMPLES_PER_TOKEN = 32
"""Samples per row: this many per token the filtering keeps (within the bounds above). An honest sampler's
histogram over m tokens from n samples is about 0.5 * sqrt(2m / (pi n)) away from its distribution: 0.07 here,
a third of the limit; at the 8192 cap, for distributions that keep more than 256 tokens, more."""
PAD_BYTES = 64 << 20
"""The batch is repeated up to this many bytes of ``probs`` per call, so one call draws many samples per row."""


def is_sampling(definition: Definition) -> bool:
    return definition.op_type == "sampling"


def method(definition: Definition) -> str:
    name = definition.name.lower()
    for kind in ("top_k_top_p", "top_k", "top_p"):
        if kind in name:
            return kind
    return "none"


def _rows(value: object, batch: int) -> list[float]:
    if isinstance(value, torch.Tensor):
        flat = value.reshape(-1).to(torch.float64).cpu()
        return [float(flat[i % flat.numel()]) for i in range(batch)] if flat.numel() else [0.0] * batch
    return [float(value)] * batch  # type: ignore[arg-type]


def valid_mask(inputs: Mapping[str, object], kind: str) -> torch.Tensor:
    """What a single sample may be, ``[batch, vocab]``: a token the reference can draw (``target_distribution``)
    or one FlashInfer-Bench's valid mask allows (its slack). Its mask alone would refuse tokens the references
    draw: the one whose mass passes p, and tokens kept by a nucleus taken after top-k renormalization."""
    return fib_mask(inputs, kind) | (target_distribution(inputs, kind) > 0).to(_probs(inputs).device)


def fib_mask(inputs: Mapping[str, object], kind: str) -> torch.Tensor:
    """FlashInfer-Bench's valid-sample mask: at least as likely as the k-th token (ties included), and within
    the nucleus of the unfiltered probabilities with ``TOP_P_SLACK``."""
    probs = _probs(inputs)
    batch, vocab = probs.shape
    mask = torch.ones_like(probs, dtype=torch.bool)
    if kind in ("top_k", "top_k_top_p"):
        for i, k in enumerate(_rows(inputs["top_k"], batch)):
            if 0 < int(k) < vocab:
                pivot = torch.sort(probs[i], descending=True).values[int(k) - 1]
                mask[i] &= probs[i] >= pivot
    if kind in ("top_p", "top_k_top_p"):
        for i, p in enumerate(_rows(inputs["top_p"], batch)):
            if 0 < p < 1:
                values, order = torch.sort(probs[i], descending=True)
                inside = torch.cumsum(values, 0) <= p + TOP_P_SLACK
                inside[0] = True
                nucleus = torch.zeros(vocab, dtype=torch.bool, device=probs.device)
                nucleus[order[inside]] = True
                mask[i] &= nucleus
    return mask


def target_distribution(inputs: Mapping[str, object], kind: str) -> torch.Tensor:
    """The distribution the references sample each row from, ``[batch, vocab]`` (float64): the k most likely
    tokens renormalized, then the smallest prefix of them whose mass passes p (the token that passes it
    included), renormalized; top-p at or below 0 keeps the most likely token."""
    probs = _probs(inputs).to(torch.float64)
    batch, vocab = probs.shape
    out = probs.clone()
    ks = _rows(inputs["top_k"], batch) if kind in ("top_k", "top_k_top_p") else [0.0] * batch
    ps = _rows(inputs["top_p"], batch) if kind in ("top_p", "top_k_top_p") else [1.0] * batch
    for i in range(batch):
        row = out[i]
        k = int(ks[i])
        if 0 < k < vocab:
            keep = torch.zeros(vocab, dtype=torch.bool, device=row.device)
            keep[torch.argsort(row, descending=True)[:k]] = True
            row = torch.where(keep, row, torch.zeros_like(row))
            row = row / row.sum()
        p = ps[i]
        if p <= 0:
            top = torch.zeros_like(row)
            top[torch.argmax(row)] = 1.0
            row = top
        elif p < 1:
            values, order = torch.sort(row, descending=True)
            before = torch.cumsum(values, 0) - values  # mass of the tokens ahead of each one
            keep = torch.zeros(vocab, dtype=torch.bool, device=row.device)
            keep[order[before <= p]] = True
            row = torch.where(keep, row, torch.zeros_like(row))
            row = row / row.sum()
        out[i] = row
    return out


def _probs(inputs: Mapping[str, object]) -> torch.Tensor:
    probs = inputs["probs"]
    if not isinstance(probs, torch.Tensor):
        raise ValueError("a sampling definition needs a 'probs' tensor input")
    return (probs if probs.dim() == 2 else probs.reshape(1, -1)).float()


def make_sampling_reference(definition: Definition) -> Callable[[dict[str, Value]], dict[str, torch.Tensor]]:
    """What a sampling kernel's outputs are checked against: the valid mask, under the first output's name."""
    kind = method(definition)
    name = next(iter(definition.outputs))

    def reference(inputs: dict[str, Value]) -> dict[str, torch.Tensor]:
        return {name: valid_mask(inputs, kind)}

    return reference


def check_samples(name: str, value: object, mask: torch.Tensor) -> Mismatch | Errors:
    """Every sample a token id below the vocabulary size that the valid mask allows for its row."""
    if not isinstance(value, torch.Tensor):
        return Mismatch(EvaluationStatus.INCORRECT_SHAPE, f"output {name!r} is {type(value).__name__}, not a tensor")
    samples = value.detach().to("cpu", torch.int64).reshape(-1)
    allowed = mask.to("cpu")
    vocab = allowed.shape[-1]
    bad = (samples < 0) | (samples >= vocab)
    if bool(bad.any()):
        first = int(bad.nonzero()[0])
        return Mismatch(
            EvaluationStatus.INCORRECT_NUMERICAL,
            f"output {name!r}: sample {int(samples[first])} (row {first}) is not a token id below {vocab}",
            math.inf,
            math.inf,
        )
    rows = torch.arange(samples.numel()) % allowed.shape[0]
    outside = ~allowed[rows, samples]
    if bool(outside.any()):
        first = int(outside.nonzero()[0])
        return Mismatch(
            EvaluationStatus.INCORRECT_NUMERICAL,
            f"output {name!r}: {int(outside.sum())} of {samples.numel()} sample(s) are tokens the top-k/top-p "
            f"filtering removes; first: token {int(samples[first])} in row {first}",
            math.inf,
            math.inf,
        )
    return Errors(0.0, 0.0)


def samples_needed(target: torch.Tensor) -> int:
    support = int((target > 0).sum(dim=-1).max())
    return max(MIN_SAMPLES, min(MAX_SAMPLES, SAMPLES_PER_TOKEN * support))


MAX_ROWS = 1 << 20
"""At most this many rows (samples) per call, however small the vocabulary."""


def repeats(inputs: Mapping[str, object], batch: int, wanted: int) -> int:
    """How many copies of the ``batch`` rows one call draws from: no more than ``wanted`` samples per row
    need, with ``probs`` at most ``PAD_BYTES`` and at most ``MAX_ROWS`` rows."""
    probs = _probs(inputs)
    per_copy = max(1, probs.numel() * probs.element_size())
    return max(1, min(wanted, PAD_BYTES // per_copy, MAX_ROWS // max(1, batch)))


def padded(inputs: Mapping[str, Value], batch: int, copies: int) -> dict[str, Value]:
    """The inputs with every tensor whose first dimension is the batch repeated ``copies`` times along it."""
    out: dict[str, Value] = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == batch:
            out[name] = value.repeat(copies, *([1] * (value.dim() - 1))).contiguous()
        else:
            out[name] = value
    return out


def distance(counts: torch.Tensor, target: torch.Tensor) -> tuple[float, int]:
    """The largest total variation distance between each row's sample histogram and its target, and its row."""
    freq = counts.to(torch.float64) / counts.sum(dim=-1, keepdim=True).clamp_min(1)
    tvd = 0.5 * (freq - target.to(freq.device)).abs().sum(dim=-1)
    row = int(torch.argmax(tvd))
    return float(tvd[row]), row
