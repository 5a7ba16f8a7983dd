"""Synthesizes input tensors that random values would make invalid, from a definition's axes and semantics.

FlashInfer Trace workloads point some inputs (page tables, sequence offsets, routing) at safetensors blobs
that are not always shipped, and definitions without workloads need such inputs too. Each rule below knows
one family of inputs by name and makes values a real caller could pass:

- ``qo_indptr``/``kv_indptr``/``cu_seqlens``: non-decreasing from 0, ending at the axis the definition ties
  them to (``num_kv_indices == kv_indptr[-1].item()``), all sharing one split of the work into sequences;
  ``kv_indices``: distinct page ids below ``num_pages`` where there are enough pages;
  ``kv_last_page_len``: in ``[1, page_size]``;
- ``sparse_indices``: distinct token ids below ``num_pages * page_size``, padded with -1;
- ``seq_lens``/``block_table``/``k_index_cache_fp8``: sequence lengths within the block table, page ids
  below ``num_pages``, and the deep_gemm FP8 cache layout with finite positive scales;
- ``initial_state_indices``/``state_batch_indices``: distinct slots of the state pool;
- ``positions``: below ``max_seq_len``; ``topk_ids``: distinct experts with packed bfloat16 weights;
- ``probs``/``top_k``/``top_p``: distributions with most of their mass on a few tokens, and thresholds
  that keep a handful of them, for the statistical check of samplers (``verify/sampling.py``).

Coupled inputs are always synthesized together (``expand_groups``). Any other missing floating-point
input is drawn from a normal distribution; a missing integer input without a rule is a ``SynthesisError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.interop.synth.axes import SynthesisError
from evoteam.gpu_bench.schema import Definition, TensorSpec

LAYOUT = ("qo_indptr", "kv_indptr", "cu_seqlens", "kv_indices", "kv_last_page_len")
SAMPLING = ("probs", "top_k", "top_p")
INDEXER = ("seq_lens", "block_table", "k_index_cache_fp8")
SLOTS = {"initial_state_indices": "pool_size", "state_batch_indices": "state_cache_size"}
SINGLES = ("sparse_indices", "positions", "topk_ids", *SLOTS)
_GROUPS = (LAYOUT, SAMPLING, INDEXER)
_TOTAL_FALLBACK = {
    "qo_indptr": ("total_q",),
    "kv_indptr": ("num_kv_indices", "total_kv"),
    "cu_seqlens": ("total_seq_len",),
}


@dataclass
class _Context:
    definition: Definition
    axes: dict[str, int]
    generator: torch.Generator

    def spec(self, name: str) -> TensorSpec:
        return self.definition.inputs[name]

    def shape(self, name: str) -> tuple[int, ...]:
        shape = self.definition.shape_of(self.spec(name), self.axes)
        if shape is None:
            raise SynthesisError(f"{self.definition.name}: input {name!r} is a scalar, not a tensor")
        return shape

    def axis(self, name: str, why: str) -> int:
        if name not in self.axes:
            raise SynthesisError(f"{self.definition.name}: {why} needs axis {name!r}, which it does not define")
        return self.axes[name]

    def tensor(self, name: str, values: torch.Tensor) -> torch.Tensor:
        return values.to(torch_dtype(self.spec(name).dtype)).reshape(self.shape(name)).contiguous()

    def randint(self, low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.generator, dtype=torch.int64)

    def randperm(self, n: int) -> torch.Tensor:
        return torch.randperm(n, generator=self.generator)

    def rand(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator, dtype=torch.float32)

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, dtype=torch.float32)


def has_rule(name: str) -> bool:
    """Whether ``name`` is an input that random values would make invalid (one this module synthesizes)."""
    return name in LAYOUT or name in SAMPLING or name in INDEXER or name in SINGLES


def expand_groups(definition: Definition, names: set[str]) -> set[str]:
    """``names`` plus every input of the definition coupled to one of them."""
    out = set(names)
    for group in _GROUPS:
        if out & set(group):
            out |= set(group) & set(definition.inputs)
    return out


def synthesize_inputs(
    definition: Definition, axes: dict[str, int], names: set[str], seed: int
) -> dict[str, torch.Tensor]:
    """Tensors for ``names`` (and the inputs coupled to them) on one workload with all axes in ``axes``."""
    ctx = _Context(definition, axes, torch.Generator().manual_seed(seed))
    wanted = expand_groups(definition, names)
    unknown = wanted - set(definition.inputs)
    if unknown:
        raise SynthesisError(f"{definition.name} has no inputs {sorted(unknown)}")
    out: dict[str, torch.Tensor] = {}
    if wanted & set(LAYOUT):
        out |= _layout(ctx, [n for n in LAYOUT if n in wanted])
    if wanted & set(SAMPLING):
        out |= _sampling(ctx)
    if wanted & set(INDEXER):
        out |= _indexer(ctx, [n for n in INDEXER if n in wanted])
    for name in sorted(wanted - set(out)):
        out[name] = _SINGLE_RULES.get(name, _fallback)(ctx, name)
    return {name: out[name] for name in definition.inputs if name in out}


def indptr_total_axis(definition: Definition, name: str) -> str:
    """The axis an index-pointer input must end at: from ``AXIS == name[-1].item()``, else by convention."""
    for text in definition.constraints or []:
        compact = text.replace(" ", "")
        suffix = f"=={name}[-1].item()"
        if compact.endswith(suffix) and compact[: -len(suffix)] in definition.axes:
            return compact[: -len(suffix)]
    for candidate in _TOTAL_FALLBACK.get(name, ()):
        if candidate in definition.axes:
            return candidate
    raise SynthesisError(f"{definition.name}: no axis says where {name!r} ends (no 'AXIS == {name}[-1].item()')")


def _split(total: int, weights: torch.Tensor) -> list[int]:
    """``total`` split into ``len(weights)`` non-negative parts roughly proportional to ``weights``, each at
    least 1 when ``total`` allows it (largest remainder)."""
    parts = len(weights)
    if parts == 0:
        return []
    base = 1 if total >= parts else 0
    rest = total - base * parts
    share = weights / weights.sum() * rest
    counts = [base + int(s) for s in share.floor().tolist()]
    order = torch.argsort(share - share.floor(), descending=True).tolist()
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _offsets(counts: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(counts, dtype=torch.int64).cumsum(0).tolist()], dtype=torch.int64)


def _layout(ctx: _Context, names: list[str]) -> dict[str, torch.Tensor]:
    pointers = [n for n in names if n.endswith("indptr") or n == "cu_seqlens"]
    every_pointer = [n for n in ("qo_indptr", "kv_indptr", "cu_seqlens") if n in ctx.definition.inputs]
    if every_pointer:
        sequences = ctx.shape(every_pointer[0])[0] - 1
    elif "kv_last_page_len" in ctx.definition.inputs:
        sequences = ctx.shape("kv_last_page_len")[0]
    else:
        raise SynthesisError(f"{ctx.definition.name}: {names} need an index-pointer input to give the sequences")
    if sequences < 0:
        raise SynthesisError(f"{ctx.definition.name}: index pointers need at least one element")
    weights = ctx.rand((sequences,)) + 0.5  # one split shared by queries and keys: lengths stay proportional
    out: dict[str, torch.Tensor] = {}
    for name in pointers:
        if ctx.shape(name)[0] != sequences + 1:
            raise SynthesisError(f"{ctx.definition.name}: index pointers {every_pointer} differ in length")
        total = ctx.axis(indptr_total_axis(ctx.definition, name), f"{name!r}")
        out[name] = ctx.tensor(name, _offsets(_split(total, weights)))
    if "kv_indices" in names:
        (count,) = ctx.shape("kv_indices")
        pages = ctx.axis("num_pages", "'kv_indices' (page ids)")
        if pages == 0 and count > 0:
            raise SynthesisError(f"{ctx.definition.name}: {count} page ids but num_pages is 0")
        ids = ctx.randperm(pages)[:count] if count <= pages else ctx.randint(0, pages, (count,))
        out["kv_indices"] = ctx.tensor("kv_indices", ids)
    if "kv_last_page_len" in names:
        page_size = ctx.axis("page_size", "'kv_last_page_len'")
        out["kv_last_page_len"] = ctx.tensor(
            "kv_last_page_len", ctx.randint(1, page_size + 1, ctx.shape("kv_last_page_len"))
        )
    return out


HOT_TOKENS = 8
"""Synthesized ``probs`` put most of each row's mass on this many tokens, as a language model's do."""
HOT_MASS = 0.95


def _sampling(ctx: _Context) -> dict[str, torch.Tensor]:
    """``probs``: each row puts ``HOT_MASS`` on ``HOT_TOKENS`` random tokens (random weights) and spreads the
    rest over the vocabulary; ``top_k`` in [2, 8]; ``top_p`` in [0.3, 0.8], so the nucleus lies among the
    likely tokens. The filtered distributions keep a handful of tokens: few samples tell a sampler apart from
    argmax or from uniform sampling (``verify/sampling.py``), even when the sampler loops over rows in Python."""
    if "probs" not in ctx.definition.inputs:
        raise SynthesisError(f"{ctx.definition.name}: top_k/top_p without a 'probs' input")
    batch, vocab = ctx.shape("probs")
    hot = min(HOT_TOKENS, vocab)
    rest = 1.0 - HOT_MASS if vocab > hot else 0.0
    probs = torch.full((batch, vocab), rest / max(1, vocab - hot), dtype=torch.float64)
    for row in range(batch):
        weights = ctx.rand((hot,)).to(torch.float64) + 0.1
        probs[row, ctx.randperm(vocab)[:hot]] = weights / weights.sum() * (1.0 - rest)
    out = {"probs": ctx.tensor("probs", probs / probs.sum(dim=-1, keepdim=True))}
    if "top_k" in ctx.definition.inputs:
        out["top_k"] = ctx.tensor("top_k", ctx.randint(min(2, vocab), min(hot, vocab) + 1, (batch,)))
    if "top_p" in ctx.definition.inputs:
        out["top_p"] = ctx.tensor("top_p", 0.3 + 0.5 * ctx.rand((batch,)))
    return out


def _indexer(ctx: _Context, names: list[str]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    pages = ctx.axis("num_pages", "the paged indexer inputs")
    page_size = ctx.axis("page_size", "the paged indexer inputs")
    if "seq_lens" in names:
        (batch,) = ctx.shape("seq_lens")
        width = ctx.axis("max_num_pages", "'seq_lens'") * page_size
        out["seq_lens"] = ctx.tensor("seq_lens", ctx.randint(1, max(width, 1) + 1, (batch,)))
    if "block_table" in names:
        out["block_table"] = ctx.tensor("block_table", ctx.randint(0, max(pages, 1), ctx.shape("block_table")))
    if "k_index_cache_fp8" in names:
        out["k_index_cache_fp8"] = _fp8_cache(ctx, pages, page_size)
    return out


def _fp8_cache(ctx: _Context, pages: int, page_size: int) -> torch.Tensor:
    """deep_gemm's layout per page: ``page_size * D`` FP8 bytes, then ``page_size`` float32 scales."""
    shape = ctx.shape("k_index_cache_fp8")
    if len(shape) != 4 or shape[2] != 1 or shape[3] <= 4:
        raise SynthesisError(f"{ctx.definition.name}: k_index_cache_fp8 must be [pages, page_size, 1, D + 4]")
    dim = shape[3] - 4
    values = ctx.randn((pages, page_size * dim)).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = (0.5 + ctx.rand((pages, page_size))).contiguous().view(torch.uint8)
    packed = torch.cat([values, scales], dim=1).contiguous().view(torch.int8)
    return ctx.tensor("k_index_cache_fp8", packed)


def _sparse_indices(ctx: _Context, name: str) -> torch.Tensor:
    tokens, topk = ctx.shape(name)
    slots = ctx.axis("num_pages", f"{name!r}") * ctx.axis("page_size", f"{name!r}")
    out = torch.full((tokens, topk), -1, dtype=torch.int64)
    most = min(topk, slots)
    for row in range(tokens):
        if most == 0:
            break
        valid = int(ctx.randint(1, most + 1, ()).item())
        out[row, :valid] = ctx.randperm(slots)[:valid]
    return ctx.tensor(name, out)


def _positions(ctx: _Context, name: str) -> torch.Tensor:
    high = ctx.axis("max_seq_len", f"{name!r}")
    if high == 0:
        raise SynthesisError(f"{ctx.definition.name}: positions need max_seq_len > 0")
    return ctx.tensor(name, ctx.randint(0, high, ctx.shape(name)))


def _slots(ctx: _Context, name: str) -> torch.Tensor:
    pool = ctx.axis(SLOTS[name], f"{name!r}")
    (batch,) = ctx.shape(name)
    if pool == 0 and batch > 0:
        raise SynthesisError(f"{ctx.definition.name}: {name} needs a non-empty {SLOTS[name]}")
    ids = ctx.randperm(pool)[:batch] if batch <= pool else ctx.randint(0, pool, (batch,))
    return ctx.tensor(name, ids)


def _topk_ids(ctx: _Context, name: str) -> torch.Tensor:
    """Packed as the trtllm routed MoE expects: expert id in the high 16 bits, bfloat16 weight in the low."""
    tokens, k = ctx.shape(name)
    experts = ctx.axis("num_experts", f"{name!r}")
    if k > experts:
        raise SynthesisError(f"{ctx.definition.name}: top_k {k} exceeds num_experts {experts}")
    ids = torch.stack([ctx.randperm(experts)[:k] for _ in range(tokens)]) if tokens else torch.empty(0, k)
    weights = torch.softmax(ctx.randn((tokens, k)), dim=-1).to(torch.bfloat16).view(torch.int16)
    bits = weights.to(torch.int64) & 0xFFFF
    return ctx.tensor(name, (ids.to(torch.int64) << 16) | bits)


def _fallback(ctx: _Context, name: str) -> torch.Tensor:
    dtype = torch_dtype(ctx.spec(name).dtype)
    shape = ctx.shape(name)
    if dtype.is_floating_point:
        return ctx.tensor(name, ctx.randn(shape))
    if dtype == torch.bool:
        return ctx.tensor(name, ctx.randint(0, 2, shape))
    raise SynthesisError(
        f"{ctx.definition.name}: no rule to synthesize integer input {name!r} (its valid values are unknown)"
    )


_SINGLE_RULES: dict[str, Callable[[_Context, str], torch.Tensor]] = {
    "sparse_indices": _sparse_indices,
    "positions": _positions,
    "topk_ids": _topk_ids,
    **dict.fromkeys(SLOTS, _slots),
}
