"""``evoteam import kernelbench``: sample problems in KernelBench's format imported and evaluated for real."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from conftest import REPO, TESTS, quick_config
from evoteam.cli import import_kernelbench
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.interop import size_cap
from evoteam.gpu_bench.interop.kernelbench.problem import (
    ImportOptions,
    KernelBenchError,
    candidate_solution,
    default_name,
    import_problem,
)
from evoteam.gpu_bench.interop.kernelbench.source import SourceError, find_constants, parse_override, rewrite, scaled
from evoteam.gpu_bench.interop.kernelbench.values import not_like_randn
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import EvaluationStatus, GeneratedInput, RandomInput, SafetensorsInput, Solution
from evoteam.gpu_bench.task import KernelTask, find_task, load_tasks
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.verify.inputs import make_inputs
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig, make_reference

SAMPLES = TESTS / "kernelbench"
MATMUL = SAMPLES / "1_Square_matrix_multiplication_.py"
TRIL = SAMPLES / "15_Matmul_for_lower_triangular_matrices.py"
SOFTMAX = SAMPLES / "23_Softmax.py"
CONV = SAMPLES / "54_conv_standard_2D_square_kernel.py"
GEMM = SAMPLES / "76_Gemm_Add_ReLU.py"
XENT = SAMPLES / "95_CrossEntropyLoss.py"
SMALL = {
    MATMUL: ["N=48"],
    TRIL: ["M=64"],
    SOFTMAX: ["batch_size=4", "dim=512"],
    CONV: ["batch_size=2", "height=12", "width=10", "out_channels=8"],
    GEMM: ["batch_size=8", "in_features=64", "out_features=32"],
    XENT: ["batch_size=64"],
}
SPEEDUP = (0.5, 2.0)
"""Where the speedup of a kernel over an identical one must land (on one of a few measurements)."""
STEADY = TimingConfig(warmup_s=0.01, min_samples=10, max_samples=200, max_time_s=0.2, flush_cache=False)


def import_cli(*args: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="evoteam import")
    import_kernelbench.add_parser(parser.add_subparsers(dest="kind", required=True))
    parsed = parser.parse_args(["kernelbench", *map(str, args)])
    code: int = parsed.run(parsed)
    return code


def imported(problem: Path, out: Path, *extra: str | Path) -> KernelTask:
    """``problem`` imported at its small test sizes into ``out``; its task."""
    assert import_cli(problem, "--out", out, "--size-override", *SMALL[problem], *extra) == 0
    name = str(extra[extra.index("--name") + 1]) if "--name" in extra else default_name(problem)
    return find_task(name, out)


def evaluate(evaluator: Evaluator, task: KernelTask, candidate: Solution, baseline: Solution) -> CandidateResult:
    definition = task.load_definition()
    return evaluator.evaluate(definition, task.load_workloads(), candidate, baseline, quick_config(), task.blob_root())


def speedup_near_one(runner: LocalRunner, task: KernelTask, candidate: Solution, baseline: Solution) -> list[float]:
    """Speedups of ``candidate`` over ``baseline`` (equal kernels), measured until one lies within SPEEDUP, at
    most four times, each with a fresh evaluator (the baseline measured again): a noisy neighbour on a shared CPU
    can spoil one measurement, not four."""
    definition, workloads = task.load_definition(), task.load_workloads()
    config = EvalConfig(timeout_s=20.0, timing=STEADY)
    seen: list[float] = []
    while len(seen) < 4:
        result = Evaluator(runner).evaluate(definition, workloads, candidate, baseline, config, task.blob_root())
        assert result.status == EvaluationStatus.PASSED, result.load_error or result.summary.worst
        assert result.summary.geomean_speedup is not None
        seen.append(result.summary.geomean_speedup)
        if SPEEDUP[0] <= seen[-1] <= SPEEDUP[1]:
            break
    return seen


@pytest.mark.integration
@pytest.mark.parametrize("problem", list(SMALL), ids=lambda p: p.stem)
def test_each_sample_imports_and_its_reference_passes_with_speedup_near_one(
    problem: Path, tmp_path: Path, runner: LocalRunner
) -> None:
    task = imported(problem, tmp_path)
    definition = task.load_definition()
    assert definition.op_type == "kernelbench" and len(task.load_workloads()) == 1
    reference = reference_solution(definition)
    seen = speedup_near_one(runner, task, reference, reference)
    assert SPEEDUP[0] <= seen[-1] <= SPEEDUP[1], f"speedups {seen}"
    # the task's starting candidate (the problem's Model as ModelNew, through the adapter) against the baseline
    seen = speedup_near_one(runner, task, task.source_solution(definition), task.baseline_solution(definition))
    assert SPEEDUP[0] <= seen[-1] <= SPEEDUP[1], f"speedups {seen}"


@pytest.mark.integration
def test_model_new_candidates_correct_and_wrong_through_the_evaluator(tmp_path: Path, evaluator: Evaluator) -> None:
    task = imported(GEMM, tmp_path)
    definition = task.load_definition()
    baseline = task.baseline_solution(definition)
    good = candidate_solution(task, definition, SAMPLES / "model_new_gemm_add_relu.py")
    result = evaluate(evaluator, task, good, baseline)
    assert result.status == EvaluationStatus.PASSED, result.load_error or result.summary.worst
    assert result.solution == "model_new_gemm_add_relu" and result.baseline == f"{task.name}__model"
    wrong = candidate_solution(task, definition, SAMPLES / "model_new_gemm_add_relu_wrong.py")
    result = evaluate(evaluator, task, wrong, baseline)
    assert result.status == EvaluationStatus.INCORRECT_NUMERICAL
    assert "(on trial 1)" in result.workloads[0].reason
    # the same ModelNew against the definition's reference (value-returning) also passes
    result = evaluate(evaluator, task, good, reference_solution(definition))
    assert result.status == EvaluationStatus.PASSED


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("model_new", ["model_new_gemm_load_inline.py", "model_new_gemm_cpp_extension.py"])
def test_an_extension_model_new_builds_in_the_sandboxed_worker(
    model_new: str, tmp_path: Path, evaluator: Evaluator
) -> None:
    """The extension (cpp_extension.load_inline, or load on a file) is built at import inside the worker, whose
    home folder is read-only: torch's extension folder is in the build cache (about 30 s of g++ each)."""
    task = imported(GEMM, tmp_path)
    definition = task.load_definition()
    candidate = candidate_solution(task, definition, SAMPLES / model_new)
    result = evaluate(evaluator, task, candidate, task.baseline_solution(definition))
    assert result.load_error is None and result.status == EvaluationStatus.PASSED, result.summary.worst


@pytest.mark.integration
def test_conv_model_new_gets_the_reference_weights_from_the_seed(tmp_path: Path, evaluator: Evaluator) -> None:
    task = imported(CONV, tmp_path)
    definition = task.load_definition()
    candidate = candidate_solution(task, definition, SAMPLES / "model_new_conv2d_unfold.py")
    result = evaluate(evaluator, task, candidate, task.baseline_solution(definition))
    assert result.status == EvaluationStatus.PASSED, result.load_error or result.summary.worst
    # a ModelNew that draws a number before creating its conv gets other weights from the same seed
    shifted = tmp_path / "shifted.py"
    shifted.write_text(
        (SAMPLES / "model_new_conv2d_unfold.py")
        .read_text()
        .replace("super().__init__()\n", "super().__init__()\n        self.scale = nn.Parameter(torch.randn(()))\n")
    )
    assert "self.scale = nn.Parameter" in shifted.read_text()
    result = evaluate(
        evaluator, task, candidate_solution(task, definition, shifted), task.baseline_solution(definition)
    )
    assert result.status == EvaluationStatus.INCORRECT_NUMERICAL


@pytest.mark.integration
def test_structured_inputs_are_recorded_so_a_candidate_may_rely_on_them(
    tmp_path: Path, evaluator: Evaluator, capsys: pytest.CaptureFixture[str]
) -> None:
    task = imported(TRIL, tmp_path, "--inputs", "auto")
    out = capsys.readouterr().out
    assert "note: input 'A' is recorded, not drawn afresh per trial: its mean is" in out
    (workload,) = task.load_workloads()
    assert isinstance(workload.inputs["A"], SafetensorsInput) and isinstance(workload.inputs["B"], SafetensorsInput)
    blob = load_file(str(task.blob_root() / workload.inputs["A"].path))
    assert torch.equal(blob["A"], torch.tril(blob["A"])) and bool((blob["A"].diagonal() != 0).all())
    definition = task.load_definition()
    blocked = candidate_solution(task, definition, SAMPLES / "model_new_tril_blocked.py")
    result = evaluate(evaluator, task, blocked, task.baseline_solution(definition))
    assert result.status == EvaluationStatus.PASSED, result.load_error or result.summary.worst
    # drawn afresh as full normal matrices, the inputs lose the structure the candidate relies on
    drawn = imported(TRIL, tmp_path / "random", "--inputs", "random")
    (workload,) = drawn.load_workloads()
    assert isinstance(workload.inputs["A"], RandomInput)
    definition = drawn.load_definition()
    blocked = candidate_solution(drawn, definition, SAMPLES / "model_new_tril_blocked.py")
    result = evaluate(evaluator, drawn, blocked, drawn.baseline_solution(definition))
    assert result.status == EvaluationStatus.INCORRECT_NUMERICAL


@pytest.mark.unit
def test_by_default_every_trial_draws_get_inputs_under_its_own_seed(tmp_path: Path) -> None:
    task = imported(TRIL, tmp_path)
    definition, (workload,) = task.load_definition(), task.load_workloads()
    assert all(isinstance(s, GeneratedInput) for s in workload.inputs.values())
    assert not (tmp_path / "blobs").exists()  # nothing recorded
    problem: dict[str, Any] = {}
    exec(TRIL.read_text().replace("M = 4096", "M = 64"), problem)
    seen = []
    for seed in (5, 6):
        values = make_inputs(definition, workload, seed, task.blob_root())
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            a, b = problem["get_inputs"]()
        assert torch.equal(values["A"], a) and torch.equal(values["B"], b)  # KernelBench's draw for that seed
        assert isinstance(values["A"], torch.Tensor) and torch.equal(values["A"], torch.tril(values["A"]))
        seen.append(values["A"])
    assert not torch.equal(seen[0], seen[1])


@pytest.mark.integration
def test_fresh_per_trial_inputs_keep_the_structure_a_candidate_relies_on(tmp_path: Path, evaluator: Evaluator) -> None:
    task = imported(TRIL, tmp_path)
    definition = task.load_definition()
    blocked = candidate_solution(task, definition, SAMPLES / "model_new_tril_blocked.py")
    result = evaluate(evaluator, task, blocked, task.baseline_solution(definition))
    assert result.status == EvaluationStatus.PASSED, result.load_error or result.summary.worst
    # a ModelNew that answers with the output for the import's own get_inputs() (seed 42) fails: no trial uses it
    memo = tmp_path / "memo.py"
    memo.write_text(
        TRIL.read_text().replace("M = 4096", "M = 64")
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        torch.manual_seed(42)\n        self.answer = Model()(*get_inputs())\n\n"
        "    def forward(self, A, B):\n        return self.answer.clone()\n"
    )
    result = evaluate(evaluator, task, candidate_solution(task, definition, memo), task.baseline_solution(definition))
    assert result.status == EvaluationStatus.INCORRECT_NUMERICAL


@pytest.mark.unit
def test_an_output_equal_to_an_input_gets_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = tmp_path / "relu_problem.py"
    problem.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
        "n = 4096\n\n\ndef get_inputs():\n    return [torch.rand(n)]\n"
    )  # torch.rand's values are positive: relu(x) is x itself
    assert import_cli(problem, "--out", tmp_path / "trial") == 0
    assert "note: output 'output' equals input 'x' on get_inputs()'s values" in capsys.readouterr().out
    assert import_cli(problem, "--out", tmp_path / "random", "--inputs", "random") == 0
    assert "equals input" not in capsys.readouterr().out


@pytest.mark.integration
def test_model_new_file_without_model_new_is_a_load_error(tmp_path: Path, evaluator: Evaluator) -> None:
    task = imported(GEMM, tmp_path)
    definition = task.load_definition()
    broken = tmp_path / "no_class.py"
    broken.write_text("import torch\n\n\nclass Other(torch.nn.Module):\n    pass\n")
    result = evaluate(evaluator, task, candidate_solution(task, definition, broken), task.baseline_solution(definition))
    assert result.status == EvaluationStatus.COMPILE_ERROR
    assert result.load_error is not None and "defines no class ModelNew" in result.load_error


@pytest.mark.integration
def test_model_new_with_the_wrong_output_shape_is_a_runtime_error(tmp_path: Path, evaluator: Evaluator) -> None:
    task = imported(GEMM, tmp_path)
    definition = task.load_definition()
    transposed = tmp_path / "transposed.py"
    transposed.write_text(
        (SAMPLES / "model_new_gemm_add_relu.py").read_text().replace(".clamp_min_(0.0)", ".clamp_min_(0.0).t()")
    )
    result = evaluate(
        evaluator, task, candidate_solution(task, definition, transposed), task.baseline_solution(definition)
    )
    assert result.status == EvaluationStatus.RUNTIME_ERROR
    assert "ModelNew.forward's output 'output' is (32, 8)" in result.workloads[0].reason


@pytest.mark.integration
def test_model_new_is_a_registered_module(tmp_path: Path, evaluator: Evaluator) -> None:
    """Dataclasses (with postponed annotations) look their module up in sys.modules while the file loads."""
    task = imported(SOFTMAX, tmp_path)
    definition = task.load_definition()
    model_new = tmp_path / "with_dataclass.py"
    model_new.write_text(
        "from __future__ import annotations\n\nimport dataclasses\n\nimport torch\n\n\n@dataclasses.dataclass\n"
        "class Options:\n    dim: int = 1\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.softmax(x, dim=Options().dim)\n"
    )
    result = evaluate(
        evaluator, task, candidate_solution(task, definition, model_new), task.baseline_solution(definition)
    )
    assert result.status == EvaluationStatus.PASSED, result.load_error


@pytest.mark.unit
def test_reference_weights_are_model_built_after_manual_seed() -> None:
    problem = import_problem(GEMM, ImportOptions(overrides={"batch_size": 4, "in_features": 8, "out_features": 6}))
    namespace: dict[str, object] = {}
    exec(
        GEMM.read_text()
        .replace("in_features = 1024", "in_features = 8")
        .replace("out_features = 512", "out_features = 6"),
        namespace,
    )
    torch.manual_seed(42)
    init = namespace["get_init_inputs"]()  # type: ignore[operator]
    torch.manual_seed(42)
    model = namespace["Model"](*init)  # type: ignore[operator]
    x = torch.randn(4, 8)
    state = torch.random.get_rng_state()
    got = make_reference(problem.definition)({"x": x})["output"]
    assert torch.equal(state, torch.random.get_rng_state()), "the reference must not move the caller's RNG"
    with torch.no_grad():
        assert torch.equal(got, model(x))
    assert "torch.manual_seed(42)" in problem.definition.description  # type: ignore[operator]


@pytest.mark.unit
def test_size_override_sets_the_constants_and_what_follows_from_them(tmp_path: Path) -> None:
    full = import_problem(SOFTMAX)
    assert full.sizes == {} and full.definition.const_axes() == {"batch_size": 16, "dim": 16384}
    small = import_problem(SOFTMAX, ImportOptions(overrides={"batch_size": 4, "dim": 512}))
    assert small.sizes == {"batch_size": 4, "dim": 512}
    assert small.definition.const_axes() == {"batch_size": 4, "dim": 512}
    assert "changed from the file: batch_size=4, dim=512" in (small.definition.description or "")
    assert make_reference(small.definition)({"x": torch.randn(4, 512)})["output"].shape == (4, 512)
    # input_shape = (num_classes,) follows num_classes; the recorded targets are drawn below the new value
    task = imported(XENT, tmp_path, "--size-override", "num_classes=5")
    definition = task.load_definition()
    assert definition.const_axes() == {"batch_size": 64, "num_classes": 5}
    assert definition.inputs["predictions"].shape == ["batch_size", "num_classes"]
    (workload,) = task.load_workloads()
    assert isinstance(workload.inputs["targets"], GeneratedInput)
    for seed in range(3):  # every trial's targets are get_inputs()'s, drawn below the new value
        targets = make_inputs(definition, workload, seed, task.blob_root())["targets"]
        assert isinstance(targets, torch.Tensor) and int(targets.max()) < 5
    assert "num_classes = 5" in (task.extra_sources[0]).read_text()


@pytest.mark.unit
def test_definition_axes_inputs_and_outputs(tmp_path: Path) -> None:
    task = imported(XENT, tmp_path, "--inputs", "auto")
    definition = task.load_definition()
    assert definition.const_axes() == {"batch_size": 64, "num_classes": 10}
    assert definition.inputs["predictions"].shape == ["batch_size", "num_classes"]
    assert definition.inputs["targets"].dtype == "int64"
    assert definition.outputs["output"].shape == []  # a 0-d loss
    (workload,) = task.load_workloads()
    targets = workload.inputs["targets"]
    assert isinstance(targets, SafetensorsInput)
    blob = load_file(str(tmp_path / targets.path))["targets"]
    assert blob.shape == (64,) and blob.dtype == torch.int64 and int(blob.min()) >= 0 and int(blob.max()) < 10
    with torch.random.fork_rng():
        torch.manual_seed(42)
        torch.randn(64, 10)
        assert torch.equal(blob, torch.randint(0, 10, (64,)))  # get_inputs()'s draw under the seed
    assert isinstance(workload.inputs["predictions"], RandomInput)  # torch.randn's: drawn afresh every trial
    # 8 x 10 predictions are too few to tell torch.randn's from other draws: recorded
    tiny = import_problem(XENT, ImportOptions(overrides={"batch_size": 8}, inputs="auto"))
    assert isinstance(tiny.workload.inputs["predictions"], SafetensorsInput)
    assert sorted(tiny.blobs) == ["predictions", "targets"]
    assert tiny.notes == ["input 'predictions' is recorded, not drawn afresh per trial: it has 80 values (under 256, "
                          "too few to tell)"]  # fmt: skip


@pytest.mark.unit
def test_recorded_inputs_and_seed(tmp_path: Path) -> None:
    task = imported(SOFTMAX, tmp_path, "--inputs", "recorded", "--seed", "7", "--name", "softmax_rec")
    (workload,) = task.load_workloads()
    x = workload.inputs["x"]
    assert isinstance(x, SafetensorsInput)
    with torch.random.fork_rng():
        torch.manual_seed(7)
        assert torch.equal(load_file(str(tmp_path / x.path))["x"], torch.randn(4, 512))


@pytest.mark.unit
def test_randn_check_tells_standard_normals_from_other_draws() -> None:
    generator = torch.Generator().manual_seed(3)
    for shape in [(1024,), (64, 48), (3, 256, 256)]:
        assert not_like_randn(torch.randn(shape, generator=generator)) is None
    assert not_like_randn(torch.randn(128, 128, generator=generator).to(torch.bfloat16)) is None
    normal = torch.randn(64, 64, generator=generator)
    others = {
        "torch.rand": torch.rand(64, 64, generator=generator),
        "softmax": normal.softmax(dim=-1),
        "tril": torch.tril(normal),
        "labels of ±1": torch.randint(0, 2, (4096,), generator=generator).float() * 2 - 1,
        "scaled": normal * 2,
        "symmetric": (normal + normal.T) / 2**0.5,
        "small": torch.randn(100, generator=generator),
    }
    for what, value in others.items():
        assert not_like_randn(value) is not None, what


@pytest.mark.unit
def test_random_inputs_that_break_the_reference_get_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = tmp_path / "log_problem.py"
    problem.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.log(x)\n\n\n"
        "n = 4096\n\n\ndef get_inputs():\n    return [torch.rand(n)]\n"
    )  # and no get_init_inputs(): Model() takes no arguments
    assert import_cli(problem, "--out", tmp_path / "auto", "--inputs", "auto") == 0
    out = capsys.readouterr().out
    assert "input 'x' is recorded" in out and "NaN" not in out
    assert import_cli(problem, "--out", tmp_path / "random", "--inputs", "random") == 0
    assert "NaN or inf on standard normal inputs" in capsys.readouterr().out


@pytest.mark.unit
def test_toml_entries_are_appended_and_duplicates_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "evoteam.toml"
    config.write_text('# mine\n[[kernel]]\nname = "other"\nsource = "a.cpp"\nlanguage = "cpp"\nentry = "f"\n'
                      'definition = "d.json"\nworkloads = "w.jsonl"\n')  # fmt: skip
    before = config.read_text()
    assert import_cli(MATMUL, "--out", tmp_path, "--size-override", "N=16") == 0
    assert import_cli(SOFTMAX, "--out", tmp_path, "--size-override", "dim=32") == 0
    text = config.read_text()
    assert text.startswith(before)
    assert [t.name for t in load_tasks(config)] == ["other", "kb_1_square_matrix_multiplication", "kb_23_softmax"]
    capsys.readouterr()
    assert import_cli(MATMUL, "--out", tmp_path, "--size-override", "N=16") == 2
    err = capsys.readouterr().err
    assert "already has a kernel named 'kb_1_square_matrix_multiplication'" in err and err.count("\n") == 1
    assert config.read_text() == text
    task = find_task("kb_1_square_matrix_multiplication", tmp_path)
    assert task.baseline == "solutions/kb_1_square_matrix_multiplication__model.json"
    assert [p.name for p in task.extra_sources] == ["model_new.py"]
    assert task.tolerance.atol == task.tolerance.rtol == 1e-4 and task.tolerance.rule == "allclose"  # fp32 outputs


@pytest.mark.integration
def test_evoteam_bench_runs_an_imported_task(tmp_path: Path) -> None:
    assert import_cli(GEMM, "--out", tmp_path, "--size-override", *SMALL[GEMM], "--name", "gemm") == 0
    proc = subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "bench", "gemm", "--json", "--max-time", "0.05", "--flush", "none"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "PASSED" and payload["summary"]["total"] == 1
    assert payload["summary"]["fast_p"]["fast_0"] == 1.0


@pytest.mark.integration
@pytest.mark.slow
def test_bench_against_the_torch_compile_baseline(tmp_path: Path) -> None:
    """KernelBench's compiled baseline: the problem's Model under torch.compile (Inductor builds C++ in the
    sandboxed worker; its first call, a correctness trial, compiles)."""
    assert import_cli(GEMM, "--out", tmp_path, "--size-override", *SMALL[GEMM], "--name", "gemm") == 0
    bench = [sys.executable, "-m", "evoteam.cli.main", "bench", "gemm", "--json", "--max-time", "0.05"]
    proc = subprocess.run(
        [*bench, "--baseline", "compile"], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "PASSED" and {t["solution"] for t in payload["traces"]} == {"gemm"}
    assert "fast_p" in payload["summary"]
    # a task that is not an imported KernelBench problem has no compiled baseline: one error, exit 2
    proc = subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "bench", "rmsnorm_tuned", "--baseline", "compile", "--json"],
        cwd=REPO / "examples" / "rmsnorm", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "needs an imported KernelBench task" in json.loads(proc.stdout)["error"]


@pytest.mark.unit
def test_model_new_option_starts_from_a_given_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidate = SAMPLES / "model_new_gemm_add_relu.py"
    task = imported(GEMM, tmp_path, "--model-new", candidate)
    assert (task.extra_sources[0]).read_text() == candidate.read_text()
    capsys.readouterr()
    assert import_cli(GEMM, "--out", tmp_path / "bad", "--model-new", SAMPLES / "76_Gemm_Add_ReLU.py") == 2
    assert "defines no top-level class ModelNew" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


@pytest.mark.unit
def test_scale_changes_the_size_constants_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = import_problem(CONV, ImportOptions(scale=1 / 16))
    # kernel_size (3) and in_channels (3) are below 8; the rest are dimensions of the input or the output
    assert problem.sizes == {"batch_size": 8, "out_channels": 8, "width": 16, "height": 16}
    assert problem.definition.outputs["output"].shape is not None
    assert import_cli(MATMUL, "--out", tmp_path, "--scale", "0.01", "--size-override", "N=24") == 0
    assert "sizes changed: N=24" in capsys.readouterr().out


HINGE = """import torch
from torch.distributions import Pareto


class Model(torch.nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 4096
input_shape = (4096,)


def get_inputs():
    predictions = Pareto(0.01, 1.5).sample((batch_size, *input_shape))
    targets = torch.randint(0, 2, (batch_size,)).float() * 2 - 1
    return [predictions, targets]
"""


@pytest.mark.unit
def test_sizes_inside_tuples_and_lists_are_overridden_and_scaled(tmp_path: Path) -> None:
    problem = tmp_path / "hinge.py"
    problem.write_text(HINGE)  # KernelBench's HingeLoss layout: a tuple constant, a sampler meta tensors lack
    # predictions * targets broadcasts (batch, n) with (batch,): n must equal batch_size, as in KernelBench
    small = import_problem(problem, ImportOptions(overrides={"batch_size": 16, "input_shape": (16,)}))
    assert small.definition.const_axes() == {"batch_size": 16}
    assert small.definition.inputs["predictions"].shape == ["batch_size", "batch_size"]
    assert "input_shape = (16,)" in small.model_new
    scaled = import_problem(problem, ImportOptions(scale=1 / 64))
    assert scaled.sizes == {"batch_size": 64, "input_shape": (64,)}
    mlp = tmp_path / "mlp.py"
    mlp.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self, sizes):\n        super().__init__()\n"
        "        self.layers = torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])))\n\n"
        "    def forward(self, x):\n        return self.layers(x)\n\n\nlayer_sizes = [256, 512, 128]\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, layer_sizes[0])]\n\n\n"
        "def get_init_inputs():\n    return [layer_sizes]\n"
    )
    assert import_problem(mlp, ImportOptions(scale=0.25)).sizes == {"layer_sizes": [64, 128, 32]}
    assert import_cli(mlp, "--out", tmp_path / "o", "--size-override", "layer_sizes=[16, 8]") == 0
    assert find_task("mlp", tmp_path / "o").load_definition().outputs["output"].shape is not None


@pytest.mark.unit
def test_a_problem_over_the_size_cap_is_refused_with_a_scale_that_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    large = tmp_path / "softmax.py"  # KernelBench's current sizes: 4096 x 393216 floats, in and out: 12 GiB
    large.write_text(SOFTMAX.read_text().replace("batch_size = 16", "batch_size = 4096").replace("16384", "393216"))
    with pytest.raises(KernelBenchError) as refused:
        import_problem(large, ImportOptions(max_mb=8))
    assert "softmax.py: its tensors need 12288.0 MiB at these sizes, over the 8 MiB cap" in str(refused.value)
    assert "--scale 0.015625 fits (3 MiB)" in str(refused.value)
    fitted = import_problem(large, ImportOptions(max_mb=8, scale=0.015625))
    assert fitted.definition.const_axes() == {"batch_size": 64, "dim": 6144}
    monkeypatch.setattr(size_cap, "memory_gib", lambda: 1.0)  # the default: 1/16 of a 1 GiB machine
    with pytest.raises(KernelBenchError) as refused:
        import_problem(large)
    assert "over the 64 MiB cap (1/16 of this machine's 1.0 GiB of RAM" in str(refused.value)


@pytest.mark.unit
def test_scale_says_which_sizes_it_cannot_change(tmp_path: Path) -> None:
    problem = tmp_path / "inline.py"
    problem.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
        "batch_size = 64\n\n\ndef get_inputs():\n    return [torch.randn(batch_size, 4096)]\n"
    )
    imported = import_problem(problem, ImportOptions(scale=0.25))
    assert imported.sizes == {"batch_size": 16}
    assert any(n.startswith("--scale cannot change size 4096: no module-level constant") for n in imported.notes)


BAD = {
    "no_model.py": ("import torch\n\n\ndef get_inputs():\n    return [torch.randn(2)]\n", "defines no Model"),
    "no_inputs.py": ("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n", "defines no get_inputs"),
    "import_error.py": (
        "import no_such_module_here\n\n\nclass Model:\n    pass\n\n\ndef get_inputs():\n    return []\n",
        "ModuleNotFoundError: No module named 'no_such_module_here'",
    ),
    "syntax.py": ("class Model(:\n", "syntax.py:1: not valid Python"),
    "not_module.py": ("class Model:\n    pass\n\n\ndef get_inputs():\n    return [1.0]\n", "not a class derived from"),
    "empty_inputs.py": (
        "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n\n\ndef get_inputs():\n    return []\n",
        "get_inputs() must return a non-empty list",
    ),
    "forward_fails.py": (
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n\n\n"
        "def get_inputs():\n    return [torch.randn(2, 3)]\n",
        "Model(*get_init_inputs())(*get_inputs()) failed: RuntimeError",
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("filename", sorted(BAD))
def test_bad_problem_files_are_one_error_line_and_exit_2(
    filename: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, message = BAD[filename]
    path = tmp_path / filename
    path.write_text(source)
    assert import_cli(path, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith("evoteam import kernelbench: error: ") and err.count("\n") == 1
    assert message in err
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size-override", "nope=3"], "assigns no module-level nope (it assigns: N)"),
        (["--size-override", "N"], "is not NAME=VALUE"),
        (["--size-override", "N=big"], "'big' is not a number or a tuple or list of numbers"),
        (["--size-override", "N=(1, 'a')"], "is not a number or a tuple or list of numbers"),
        (["--scale", "-1"], "--scale must be positive"),
        (["--max-mb", "0"], "--max-mb must be positive"),
        (["--max-mb", "0.01"], "192.0 MiB at these sizes, over the 0.01 MiB cap (--max-mb): --scale 0.00390625 fits"),
        (["--name", "bad name"], "task name 'bad name'"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert import_cli(MATMUL, "--out", tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.unit
def test_missing_problem_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert import_cli(tmp_path / "absent.py", "--out", tmp_path) == 2
    err = capsys.readouterr().err
    assert err.startswith("evoteam import kernelbench: error: cannot read ") and err.count("\n") == 1
    assert not (tmp_path / "evoteam.toml").exists()


@pytest.mark.integration
def test_the_import_command_through_the_evoteam_cli(tmp_path: Path) -> None:
    """``evoteam import kernelbench`` as a user types it: exit 0 and a task, exit 2 and one line for a bad file."""
    command = [sys.executable, "-m", "evoteam.cli.main", "import", "kernelbench"]
    ok = subprocess.run(
        [*command, str(SOFTMAX), "--out", str(tmp_path), "--size-override", "batch_size=2", "dim=64"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert find_task("kb_23_softmax", tmp_path).load_definition().const_axes() == {"batch_size": 2, "dim": 64}
    bad = subprocess.run(
        [*command, str(tmp_path / "absent.py")], capture_output=True, text=True, timeout=300, check=False
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot read" in bad.stderr


@pytest.mark.unit
def test_source_rewriting_keeps_comments_and_derived_values() -> None:
    source = "a = 1024 * 2  # rows\nb = a * 2\nc: int = 3\nname = 'x'\n"
    constants = find_constants(source)
    assert constants["a"].literal == 2048 and constants["b"].literal is None and constants["c"].literal == 3
    assert constants["name"].literal is None
    assert rewrite(source, {"a": 16}) == "a = 16  # rows\nb = a * 2\nc: int = 3\nname = 'x'\n"
    assert parse_override("batch_size = 8") == ("batch_size", 8)
    assert scaled(4096, 0.01) == 40 and scaled(16, 0.1) == 8 and scaled(100, 0.5) == 50 and scaled(3, 0.1) == 1
    with pytest.raises(SourceError, match="assigns no module-level z"):
        rewrite(source, {"z": 1})
