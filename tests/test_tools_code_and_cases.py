"""The ``assembly`` tool (the code a build generated: assembly and g++'s vectorization report for C++, PTX for
CUDA, filtered) and the ``test`` tool (a scratch correctness test on sizes and values the agent picks: NaN,
infinities, extremes), over the real compiler and evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import KERNELS, quick_config, scale_add_task
from evoteam.gpu_bench.api import Binding, BuildSpec, Language, Solution, SourceFile, listing
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc
from evoteam.gpu_bench.build.listing import split_functions
from evoteam.gpu_bench.schema import FillInput, Workload
from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.verify.inputs import InputError, make_inputs
from evoteam.roles.agent_api import Submission
from evoteam.roles.knowledge import KnowledgeStore
from evoteam.roles.tools import Author
from evoteam.roles.tools.candidate import seed_workspace
from evoteam.roles.tools.evaluation import EvaluationCache, FakeEvaluations, TaskEvaluations, scripted_result
from evoteam.roles.tools.factory import ToolServices, build_toolbox

AUTHOR = Author(role="Debugger", agent_id="dbg-1", round=1)
ZEROES_NAN = "out[i] = (x[i] != x[i]) ? 0.0f : 2.0f * x[i] + y[i];"


def toolbox(tmp_path: Path, evaluations: EvaluationCache):  # type: ignore[no-untyped-def]
    task = scale_add_task(flags=["-O3"])
    workspace = seed_workspace(task, tmp_path / "ws")
    services = ToolServices(
        definition=task.load_definition(), evaluations=evaluations, knowledge=KnowledgeStore(tmp_path / "r", "k")
    )
    submissions: list[Submission] = []
    return build_toolbox(task, workspace, services, AUTHOR, submissions), workspace


@pytest.mark.integration
def test_scratch_cases_pass_an_honest_kernel_and_catch_one_that_drops_nan(tmp_path: Path, evaluator: Evaluator) -> None:
    task = scale_add_task(flags=["-O3"])
    tools, workspace = toolbox(tmp_path, EvaluationCache(TaskEvaluations(evaluator, task, quick_config())))
    cases = [
        {"axes": {"n": 1}},
        {"axes": {"n": 4097}, "fill": {"x": "specials"}},
        {"fill": {"x": "nan"}},
        {"fill": {"x": "large", "y": "tiny"}},
    ]
    honest = tools.call("test", {"cases": cases})
    assert not honest.is_error, honest.content
    assert honest.content.splitlines()[0] == "4/4 case(s) passed"
    assert "test-3 (n=1000; x=nan): PASSED" in honest.content  # the first workload's size where none is given
    text = (workspace.root / "honest.cpp").read_text()
    (workspace.root / "honest.cpp").write_text(text.replace("out[i] = 2.0f * x[i] + y[i];", ZEROES_NAN))
    dropped = tools.call("test", {"cases": cases})
    assert dropped.content.splitlines()[0] == "2/4 case(s) passed", dropped.content
    assert "test-2 (n=4097; x=specials): INCORRECT_NUMERICAL" in dropped.content
    assert "test-3 (n=1000; x=nan): INCORRECT_NUMERICAL" in dropped.content
    assert dropped.data is not None and dropped.data["status"] == "INCORRECT_NUMERICAL"
    wrong = tools.call("test", {"cases": [{"axes": {"m": 3}}]})
    assert wrong.is_error and "['m'] are not variable axes of scale_add_f32" in wrong.content
    assert tools.call("test", {"cases": [{"fill": {"z": "nan"}}]}).is_error


@pytest.mark.unit
def test_scratch_cases_need_the_task_s_own_evaluator(tmp_path: Path) -> None:
    fake = EvaluationCache(FakeEvaluations(lambda s: scripted_result(s.name, {"small": 1.0})))
    tools, _ = toolbox(tmp_path, fake)
    result = tools.call("test", {"cases": [{"fill": {"x": "nan"}}]})
    assert result.is_error and "scratch tests need the task's own evaluator" in result.content


@pytest.mark.unit
def test_fill_values() -> None:
    definition = load_definition(Path(__file__).parent / "data" / "scale_add.json")

    def made(fill: str) -> torch.Tensor:
        workload = Workload(uuid="w", axes={"n": 64}, inputs={"x": FillInput(value=fill)})  # type: ignore[arg-type]
        value = make_inputs(definition, workload, 0, None)["x"]
        assert isinstance(value, torch.Tensor) and value.shape == (64,)
        return value

    assert made("zeros").eq(0).all() and made("ones").eq(1).all() and made("nan").isnan().all()
    assert made("inf").isposinf().all() and made("-inf").isneginf().all()
    assert made("large").eq(torch.finfo(torch.float32).max / 2).all()
    assert made("tiny").eq(torch.finfo(torch.float32).tiny).all()
    specials = made("specials")
    assert specials.isnan().any() and specials.isposinf().any() and specials.isneginf().any()
    assert specials.isfinite().sum() > 48  # mostly ordinary values
    assert torch.equal(made("specials").nan_to_num(), specials.nan_to_num())  # seeded


@pytest.mark.unit
def test_nan_in_an_integer_input_is_refused() -> None:
    definition = load_definition(Path(__file__).parent / "data" / "scale_add.json")
    changed = definition.model_copy(
        update={"inputs": {**definition.inputs, "x": definition.inputs["x"].model_copy(update={"dtype": "int32"})}}
    )
    workload = Workload(uuid="w", axes={"n": 4}, inputs={"x": FillInput(value="nan")})
    with pytest.raises(InputError, match="'nan' needs a floating-point input"):
        make_inputs(changed, workload, 0, None)


@pytest.mark.integration
def test_assembly_of_a_cpp_kernel_its_vectorization_report_and_filters(tmp_path: Path) -> None:
    tools, _ = toolbox(tmp_path, EvaluationCache(FakeEvaluations(lambda s: scripted_result(s.name, {}))))
    asm = tools.call("assembly", {"view": "asm", "function": "scale_add"})
    assert not asm.is_error, asm.content
    assert asm.content.startswith("asm of scale_add: ") and "ret" in asm.content
    assert ".cfi_startproc" not in asm.content  # directives left out
    report = tools.call("assembly", {"view": "vectorization"})
    assert not report.is_error and "honest.cpp:3:" in report.content and "vectorized" in report.content
    only = tools.call("assembly", {"view": "asm", "pattern": r"^\s+ret\b"})
    header, *rets = only.content.splitlines()[1:]
    assert header == "== scale_add ==" and rets and set(rets) == {"\tret"}
    wrong = tools.call("assembly", {"view": "ptx"})
    assert wrong.is_error and wrong.content == "ptx is not a view of cpp code (its views: asm, vectorization)"
    missing = tools.call("assembly", {"view": "asm", "function": "nothing_here"})
    assert missing.is_error and "the listing holds: scale_add" in missing.content
    assert tools.call("assembly", {"view": "asm", "pattern": "("}).is_error


@pytest.mark.integration
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_ptx_of_a_cuda_kernel_filtered_to_its_global_loads(tmp_path: Path) -> None:
    spec = BuildSpec(language=Language.CUDA, target_hardware=["sm_90a"], entry_point="k.cu::launch", binding=Binding.C)
    source = SourceFile(path="k.cu", content=(KERNELS / "cuda" / "scale_add_kernel.cu").read_text())
    solution = Solution(name="k", definition="d", author="a", spec=spec, sources=[source])
    found = listing(solution, "ptx", pattern=r"ld\.global", cache_root=tmp_path / "cache")
    assert found.problem is None and found.functions, found
    assert found.text.splitlines()[0].startswith("== ") and "ld.global" in found.text


@pytest.mark.unit
def test_listings_are_cut_into_functions() -> None:
    asm = '\t.file\t"k.cpp"\nscale:\n\tvmulps %ymm0, %ymm1, %ymm2\n.L3:\n\tret\nother:\n\tret\n'
    assert [name for name, _ in split_functions(asm, "asm")] == ["", "scale", "other"]
    ptx = (
        ".version 8.0\n.visible .entry _Z5scalePf(\n .param .u64 p\n)\n{\n ret;\n}\n.func (.reg .b32 r) helper()\n{}\n"
    )
    assert [name for name, _ in split_functions(ptx, "ptx")] == ["", "_Z5scalePf", "helper"]
    sass = "\tcode for sm_90a\n\t\tFunction : _Z5scalePf\n\t/*0000*/ LDG.E R2, desc[UR4][R2.64] ;\n"
    assert [name for name, _ in split_functions(sass, "sass")] == ["", "_Z5scalePf"]
