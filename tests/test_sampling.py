"""Sampling definitions are checked statistically, as FlashInfer-Bench checks them: every sample must be a token
the top-k/top-p filtering keeps, and many samples must follow the filtered distribution."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from conftest import SHARED_DATA, TESTS, quick_config
from evoteam.cli import import_flashinfer as cli_import
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.interop.synth.inputs import synthesize_inputs
from evoteam.gpu_bench.schema import Binding, BuildSpec, EvaluationStatus, Language, Solution, SourceFile
from evoteam.gpu_bench.task import KernelTask, load_definition, load_tasks
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.verify.sampling import TVD_LIMIT, method, target_distribution, valid_mask

needs_dataset = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the FlashInfer Trace dataset is not in ../shared")
SAMPLERS = TESTS / "kernels" / "sampling"
FULL = SHARED_DATA / "definitions" / "sampling" / "top_k_top_p_sampling_from_probs_v128256.json"


@pytest.mark.unit
def test_the_mask_and_the_target_follow_the_references_filtering() -> None:
    probs = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])
    inputs = {"probs": probs, "top_k": torch.tensor([3, 1]), "top_p": torch.tensor([0.5, 0.9])}
    target = target_distribution(inputs, "top_k_top_p")
    # row 0: top-3 renormalized (4/9, 3/9, 2/9); the token that passes 0.5 is kept: the first two
    assert torch.allclose(target[0], torch.tensor([4 / 7, 3 / 7, 0.0, 0.0], dtype=torch.float64))
    assert torch.equal(target[1], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64))
    mask = valid_mask(inputs, "top_k_top_p")  # FlashInfer-Bench's: 0.05 of slack on the nucleus
    assert mask[0].tolist() == [True, True, False, False] and mask[1].tolist() == [False, False, False, True]
    assert target_distribution({"probs": probs, "top_p": torch.tensor([0.0, 0.0])}, "top_p")[0, 0] == 1.0
    assert method(load_definition(FULL)) == "top_k_top_p" if FULL.is_file() else True


@pytest.mark.unit
@needs_dataset
def test_synthesized_inputs_keep_several_likely_tokens() -> None:
    definition = load_definition(FULL)
    inputs = synthesize_inputs(definition, {"batch_size": 4, "vocab_size": 128256}, {"probs", "top_k", "top_p"}, 7)
    target = target_distribution(inputs, "top_k_top_p")
    kept = (target > 0).sum(dim=-1)
    assert bool((kept >= 1).all()) and bool((kept <= 8).all()) and int(kept.max()) >= 2
    assert bool((target.max(dim=-1).values < 1 - TVD_LIMIT).any())  # an argmax sampler is caught


def small_task(tmp_path: Path) -> KernelTask:
    """The Llama top-k/top-p sampling definition with a 2048-token vocabulary, imported with generated
    workloads (the references loop over rows on the CPU)."""
    data = json.loads(FULL.read_text())
    data["name"] = "top_k_top_p_sampling_from_probs_v2048"
    data["axes"]["vocab_size"]["value"] = 2048
    data["reference"] = data["reference"].replace("128256", "2048")
    (tmp_path / "fib" / "definitions" / "sampling").mkdir(parents=True)
    (tmp_path / "fib" / "definitions" / "sampling" / f"{data['name']}.json").write_text(json.dumps(data))
    parser = argparse.ArgumentParser()
    cli_import.add_parser(parser.add_subparsers(dest="kind"))
    args = parser.parse_args(["flashinfer", str(tmp_path / "fib"), "--out", str(tmp_path / "out"), "--generate", "2"])
    assert args.run(args) == 0
    (task,) = load_tasks(tmp_path / "out" / "evoteam.toml")
    return task


def sampler(filename: str) -> Solution:
    path = SAMPLERS / filename
    return Solution(
        name=path.stem,
        definition="top_k_top_p_sampling_from_probs_v2048",
        author="tests",
        spec=BuildSpec(
            language=Language.PYTHON,
            target_hardware=["cpu"],
            entry_point=f"{path.name}::run",
            binding=Binding.PYTHON,
            destination_passing_style=False,
        ),
        sources=[SourceFile(path=path.name, content=path.read_text())],
    )


@pytest.mark.integration
@needs_dataset
def test_samplers_are_judged_by_what_they_draw(tmp_path: Path, evaluator: Evaluator) -> None:
    task = small_task(tmp_path)
    definition, workloads = task.load_definition(), task.load_workloads()
    baseline = reference_solution(definition)

    def status(solution: Solution) -> tuple[EvaluationStatus, str]:
        result = evaluator.evaluate(definition, workloads, solution, baseline, quick_config(), task.blob_root())
        return result.status, result.summary.worst.reason if result.summary.worst else ""

    assert status(baseline) == (EvaluationStatus.PASSED, "")  # the reference's own samples pass
    assert status(sampler("vectorized.py"))[0] == EvaluationStatus.PASSED
    verdict, reason = status(sampler("argmax.py"))  # every sample allowed, but a spike: caught statistically
    assert verdict == EvaluationStatus.INCORRECT_NUMERICAL and "the samples' distribution is" in reason, reason
    verdict, reason = status(sampler("uniform.py"))
    assert verdict == EvaluationStatus.INCORRECT_NUMERICAL and "tokens the top-k/top-p filtering removes" in reason
