"""Input and workload synthesis: values consistent with the definition, deterministic, marked synthetic."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import SHARED_DATA
from evoteam.gpu_bench.interop.synth.axes import SynthesisError, small_axes, solve_axis_constraints, workload_bytes
from evoteam.gpu_bench.interop.synth.inputs import expand_groups, synthesize_inputs
from evoteam.gpu_bench.interop.synth.workloads import (
    SYNTHETIC_PREFIX,
    blob_relpath,
    complete_workload,
    generate_workloads,
    is_synthetic,
    original_uuid,
)
from evoteam.gpu_bench.schema import Definition, RandomInput, SafetensorsInput, ScalarInput, Workload
from evoteam.gpu_bench.task import load_definition, load_workloads
from evoteam.gpu_bench.verify.inputs import make_inputs
from evoteam.gpu_bench.verify.sampling import target_distribution

pytestmark = pytest.mark.unit

PAGED = {
    "name": "paged_prefill_ps4",
    "op_type": "paged",
    "axes": {
        "batch_size": {"type": "var"},
        "num_pages": {"type": "var"},
        "page_size": {"type": "const", "value": 4},
        "len_indptr": {"type": "var"},
        "num_kv_indices": {"type": "var"},
        "total_q": {"type": "var"},
        "head_dim": {"type": "const", "value": 8},
    },
    "inputs": {
        "q": {"shape": ["total_q", "head_dim"], "dtype": "bfloat16"},
        "k_cache": {"shape": ["num_pages", "page_size", "head_dim"], "dtype": "bfloat16"},
        "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
        "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
        "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
        "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"},
        "sm_scale": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"out": {"shape": ["total_q", "head_dim"], "dtype": "bfloat16"}},
    "constraints": [
        "len_indptr == batch_size + 1",
        "total_q == qo_indptr[-1].item()",
        "num_kv_indices == kv_indptr[-1].item()",
    ],
    "reference": "def run(q, k_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n    return q\n",
}


def _definition(base: dict[str, Any], **changes: Any) -> Definition:
    return Definition.model_validate({**base, **changes})


def _sampling(inputs: dict[str, Any], reference: str) -> Definition:
    return _definition(
        {
            "name": "sampling_v50",
            "op_type": "sampling",
            "axes": {"batch_size": {"type": "var"}, "vocab_size": {"type": "const", "value": 50}},
            "inputs": inputs,
            "outputs": {"samples": {"shape": ["batch_size"], "dtype": "int64"}},
            "reference": reference,
        }
    )


TOP_K_TOP_P = """\
import torch

def run(probs, top_k, top_p):
    out = torch.empty(probs.shape[0], dtype=torch.int64)
    for i in range(probs.shape[0]):
        row = probs[i].clone()
        k = int(top_k[i])
        keep = torch.argsort(row, descending=True)[:k]
        filtered = torch.zeros_like(row)
        filtered[keep] = row[keep]
        row = filtered / filtered.sum()
        vals, idx = torch.sort(row, descending=True)
        remove = torch.cumsum(vals, 0) > float(top_p[i])
        remove[1:] = remove[:-1].clone()
        remove[0] = False
        filtered = torch.zeros_like(row)
        filtered[idx[~remove]] = row[idx[~remove]]
        out[i] = torch.multinomial(filtered / filtered.sum(), 1).squeeze(0)
    return out
"""


@pytest.mark.parametrize(
    "axes",
    [
        {"batch_size": 3, "num_pages": 20, "len_indptr": 4, "num_kv_indices": 9, "total_q": 5},
        {"batch_size": 1, "num_pages": 2, "len_indptr": 2, "num_kv_indices": 7, "total_q": 30},
        {"batch_size": 4, "num_pages": 64, "len_indptr": 5, "num_kv_indices": 2, "total_q": 0},
    ],
)
def test_paged_layout_is_consistent(axes: dict[str, int]) -> None:
    definition = _definition(PAGED)
    all_axes = definition.axis_values(axes)
    t = synthesize_inputs(definition, all_axes, {"kv_indptr"}, seed=7)
    assert set(t) == {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"}  # coupled: made together
    for name, total in (("qo_indptr", axes["total_q"]), ("kv_indptr", axes["num_kv_indices"])):
        ptr = t[name]
        assert ptr.dtype == torch.int32 and ptr.shape == (axes["len_indptr"],)
        assert ptr[0] == 0 and ptr[-1] == total
        assert bool((ptr[1:] >= ptr[:-1]).all())
    pages_per_seq = t["kv_indptr"].diff()
    if axes["num_kv_indices"] >= axes["batch_size"]:
        assert bool((pages_per_seq >= 1).all())
    ids = t["kv_indices"]
    assert ids.shape == (axes["num_kv_indices"],) and bool(((ids >= 0) & (ids < axes["num_pages"])).all())
    if axes["num_kv_indices"] <= axes["num_pages"]:
        assert len(set(ids.tolist())) == len(ids)  # distinct pages when there are enough
    last = t["kv_last_page_len"]
    assert bool(((last >= 1) & (last <= 4)).all())


def test_synthesis_is_deterministic_per_seed() -> None:
    definition = _definition(PAGED)
    axes = definition.axis_values(
        {"batch_size": 3, "num_pages": 20, "len_indptr": 4, "num_kv_indices": 9, "total_q": 5}
    )
    a = synthesize_inputs(definition, axes, {"kv_indices"}, seed=1)
    b = synthesize_inputs(definition, axes, {"kv_indices"}, seed=1)
    c = synthesize_inputs(definition, axes, {"kv_indices"}, seed=2)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_small_axes_follow_the_axis_constraints() -> None:
    definition = _definition(PAGED)
    values = small_axes(definition)
    assert values["len_indptr"] == values["batch_size"] + 1
    bigger = small_axes(definition, scale=4)
    assert bigger["batch_size"] == 4 * values["batch_size"] and bigger["len_indptr"] == bigger["batch_size"] + 1
    grown = _definition(
        PAGED,
        axes={**PAGED["axes"], "topk": {"type": "const", "value": 64}},
        constraints=[*PAGED["constraints"], "topk <= num_pages * page_size", "total_q > 5"],
    )
    values = small_axes(grown)
    assert values["num_pages"] * 4 >= 64 and values["total_q"] > 5


def test_an_unsatisfiable_axis_constraint_is_an_error() -> None:
    definition = _definition(PAGED, constraints=["page_size > 100"])
    with pytest.raises(SynthesisError, match="page_size > 100"):
        solve_axis_constraints(definition, {a: 1 for a in definition.var_axes()})


def test_sampling_inputs_keep_a_handful_of_likely_tokens() -> None:
    definition = _sampling(
        {
            "probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
            "top_k": {"shape": ["batch_size"], "dtype": "int32"},
            "top_p": {"shape": ["batch_size"], "dtype": "float32"},
        },
        TOP_K_TOP_P,
    )
    t = synthesize_inputs(definition, {"batch_size": 6, "vocab_size": 50}, {"probs"}, seed=3)
    assert torch.allclose(t["probs"].sum(-1), torch.ones(6)) and bool((t["probs"] > 0).all())
    hot = t["probs"].topk(8, dim=-1).values.sum(-1)  # 95% of the mass on 8 tokens, the rest spread evenly
    assert torch.allclose(hot, torch.full((6,), 0.95), atol=1e-4)
    assert bool(((t["top_k"] >= 2) & (t["top_k"] <= 8)).all()) and t["top_k"].unique().numel() > 1
    assert bool(((t["top_p"] >= 0.3) & (t["top_p"] <= 0.8)).all())
    # the reference samples among several tokens: what a statistical check tells apart from argmax
    target = target_distribution(t, "top_k_top_p")
    assert int((target > 0).sum(-1).max()) >= 2 and bool((target.max(-1).values < 0.8).any())
    namespace: dict[str, Any] = {}
    exec(TOP_K_TOP_P, namespace)
    draws = torch.stack([namespace["run"](t["probs"], t["top_k"], t["top_p"]) for _ in range(50)])
    assert bool((target.gather(1, draws.T) > 0).all())  # every draw is a token the target keeps


def test_top_k_alone_keeps_between_two_and_eight_tokens() -> None:
    definition = _sampling(
        {
            "probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
            "top_k": {"shape": ["batch_size"], "dtype": "int32"},
        },
        "def run(probs, top_k):\n    return probs.argmax(-1)\n",
    )
    t = synthesize_inputs(definition, {"batch_size": 4, "vocab_size": 50}, {"top_k"}, seed=0)
    assert all(2 <= k <= 8 for k in t["top_k"].tolist())


def test_sparse_indices_are_distinct_valid_tokens_padded_with_minus_one() -> None:
    definition = _definition(
        {
            "name": "sparse",
            "op_type": "dsa",
            "axes": {
                "num_tokens": {"type": "var"},
                "num_pages": {"type": "var"},
                "page_size": {"type": "const", "value": 4},
                "topk": {"type": "const", "value": 16},
            },
            "inputs": {"sparse_indices": {"shape": ["num_tokens", "topk"], "dtype": "int32"}},
            "outputs": {"o": {"shape": ["num_tokens"], "dtype": "float32"}},
            "reference": "def run(sparse_indices):\n    return sparse_indices.float().sum(-1)\n",
        }
    )
    axes = {"num_tokens": 8, "num_pages": 3, "page_size": 4, "topk": 16}
    rows = synthesize_inputs(definition, axes, {"sparse_indices"}, seed=0)["sparse_indices"]
    for row in rows.tolist():
        valid = [v for v in row if v != -1]
        assert valid and row[: len(valid)] == valid  # padding only at the end
        assert len(set(valid)) == len(valid) and all(0 <= v < 12 for v in valid)
    assert rows.dtype == torch.int32


def test_missing_integer_without_a_rule_is_refused_and_floats_fall_back_to_normal() -> None:
    definition = _definition(
        PAGED,
        inputs={**PAGED["inputs"], "mystery": {"shape": ["batch_size"], "dtype": "int32"}},
    )
    axes = definition.axis_values({"batch_size": 2, "num_pages": 4, "len_indptr": 3, "num_kv_indices": 2, "total_q": 2})
    with pytest.raises(SynthesisError, match="mystery"):
        synthesize_inputs(definition, axes, {"mystery"}, seed=0)
    q = synthesize_inputs(definition, axes, {"q"}, seed=0)["q"]
    assert q.dtype == torch.bfloat16 and q.shape == (2, 8) and bool(q.float().std() > 0.1)


def test_expand_groups_adds_only_coupled_inputs_the_definition_has() -> None:
    definition = _definition(PAGED)
    assert expand_groups(definition, {"kv_indices"}) == {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"}
    assert expand_groups(definition, {"q"}) == {"q"}


def _missing_blob_workload() -> Workload:
    blob = "./blob/workloads/paged/paged_prefill_ps4/gone.safetensors"
    return Workload(
        uuid="abc-123",
        axes={"batch_size": 2, "num_pages": 10, "len_indptr": 3, "num_kv_indices": 5, "total_q": 4},
        inputs={
            "q": RandomInput(),
            "k_cache": RandomInput(),
            "kv_indptr": SafetensorsInput(path=blob, tensor_key="kv_indptr"),
            "kv_indices": SafetensorsInput(path=blob, tensor_key="kv_indices"),
            "qo_indptr": SafetensorsInput(path=blob, tensor_key="qo_indptr"),
            "sm_scale": ScalarInput(value=0.25),
        },
    )


def test_missing_blobs_are_synthesized_and_the_workload_marked(tmp_path: Path) -> None:
    definition = _definition(PAGED)
    prepared = complete_workload(definition, _missing_blob_workload(), tmp_path)
    w = prepared.workload
    assert is_synthetic(w) and w.uuid == SYNTHETIC_PREFIX + "abc-123" and original_uuid(w) == "abc-123"
    assert w.axes == _missing_blob_workload().axes
    assert prepared.blob_path == blob_relpath(definition, w.uuid)
    assert prepared.blob_path.startswith("blob/workloads/paged/paged_prefill_ps4/paged_prefill_ps4_synthetic-")
    assert set(prepared.blob) == {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"}
    for name in prepared.blob:
        source = w.inputs[name]
        assert isinstance(source, SafetensorsInput) and source.path == f"./{prepared.blob_path}"
    assert w.inputs["sm_scale"] == ScalarInput(value=0.25) and w.inputs["q"] == RandomInput()
    # the harness loads them like any blob
    root = tmp_path / "root"
    (root / prepared.blob_path).parent.mkdir(parents=True)
    save_file(prepared.blob, str(root / prepared.blob_path))
    values = make_inputs(definition, w, seed=0, blob_root=root)
    assert torch.equal(values["kv_indices"], prepared.blob["kv_indices"])  # type: ignore[arg-type]
    assert values["sm_scale"] == 0.25


def test_workloads_whose_blobs_exist_are_kept_as_they_are(tmp_path: Path) -> None:
    definition = _definition(PAGED)
    workload = _missing_blob_workload()
    blob = tmp_path / "blob/workloads/paged/paged_prefill_ps4/gone.safetensors"
    blob.parent.mkdir(parents=True)
    save_file(
        {
            "kv_indptr": torch.tensor([0, 2, 5], dtype=torch.int32),
            "kv_indices": torch.arange(5, dtype=torch.int32),
            "qo_indptr": torch.tensor([0, 1, 4], dtype=torch.int32),
        },
        str(blob),
    )
    prepared = complete_workload(definition, workload, tmp_path)
    assert prepared.workload == workload and not prepared.synthetic and not prepared.blob
    assert prepared.copies == ["./blob/workloads/paged/paged_prefill_ps4/gone.safetensors"]


def test_an_inconsistent_dataset_workload_is_an_error(tmp_path: Path) -> None:
    workload = _missing_blob_workload()
    bad = workload.model_copy(update={"axes": {**workload.axes, "num_pages": 0}})
    with pytest.raises(SynthesisError, match="num_pages is 0"):
        complete_workload(_definition(PAGED), bad, tmp_path)


def test_generated_workloads_are_small_deterministic_and_synthetic() -> None:
    definition = _definition(PAGED)
    first = generate_workloads(definition, count=3)
    again = generate_workloads(definition, count=3)
    assert [p.workload.uuid for p in first] == [p.workload.uuid for p in again]
    assert len(first) == 3 and all(p.synthetic for p in first)
    sizes = [p.workload.axes["batch_size"] for p in first]
    assert sizes == [2, 4, 8]
    for p, q in zip(first, again, strict=True):
        assert all(torch.equal(p.blob[k], q.blob[k]) for k in p.blob)
        assert isinstance(p.workload.inputs["q"], RandomInput)
        scale = p.workload.inputs["sm_scale"]
        assert isinstance(scale, ScalarInput) and scale.value == pytest.approx(1 / math.sqrt(8))
        assert isinstance(p.workload.inputs["kv_indices"], SafetensorsInput)
    limit = workload_bytes(definition, definition.axis_values(first[1].workload.axes))
    assert len(generate_workloads(definition, count=3, max_bytes=limit)) == 2


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the FlashInfer Trace dataset is not in ../shared/data")
def test_every_dataset_definition_gets_consistent_synthetic_workloads(tmp_path: Path) -> None:
    """Every definition generates a workload meeting its constraints, and every dataset workload with missing
    blobs is completed, except the few whose own axes contradict each other (reported with the reason)."""
    inconsistent: list[str] = []
    definitions = sorted(SHARED_DATA.glob("definitions/*/*.json"))
    assert len(definitions) > 100
    for path in definitions:
        definition = load_definition(path)
        (generated,) = generate_workloads(definition, count=1)
        assert is_synthetic(generated.workload)
        workloads_file = SHARED_DATA / "workloads" / definition.op_type / f"{definition.name}.jsonl"
        if not workloads_file.is_file():
            continue
        for workload in load_workloads(workloads_file):
            try:
                prepared = complete_workload(definition, workload, SHARED_DATA)
            except SynthesisError as exc:
                inconsistent.append(f"{definition.name}/{workload.uuid}: {exc}")
                continue
            if prepared.blob:
                assert is_synthetic(prepared.workload)
                assert original_uuid(prepared.workload) == workload.uuid
    # the dataset has two workloads with 2 page ids but num_pages 0: no page table can be made for them
    assert len(inconsistent) == 2, inconsistent
    assert all("num_pages is 0" in line for line in inconsistent)


def test_blob_round_trip_keeps_dtypes(tmp_path: Path) -> None:
    definition = _definition(PAGED)
    (prepared,) = generate_workloads(definition, count=1)
    assert prepared.blob_path is not None
    path = tmp_path / "b.safetensors"
    save_file(prepared.blob, str(path))
    loaded = load_file(str(path))
    assert {k: v.dtype for k, v in loaded.items()} == {k: v.dtype for k, v in prepared.blob.items()}
