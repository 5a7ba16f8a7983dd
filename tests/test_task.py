"""evoteam.toml: the example loads, baselines resolve, and mistakes are one clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from evoteam.gpu_bench.schema import Binding, Language
from evoteam.gpu_bench.task import CONFIG_NAME, TaskError, find_task, load_tasks

pytestmark = pytest.mark.unit

EXAMPLE = REPO / "examples" / "rmsnorm"


def test_every_example_kernel_loads_with_its_definition_workloads_and_baseline() -> None:
    tasks = load_tasks(EXAMPLE / CONFIG_NAME)
    assert {t.name for t in tasks} >= {"rmsnorm", "rmsnorm_tuned", "rmsnorm_tvmffi"}
    for task in tasks:
        definition = task.load_definition()
        assert task.load_workloads()
        assert task.source.is_file()
        source = task.source_solution(definition)
        assert source.spec.entry_symbol == task.entry
        baseline = task.baseline_solution(definition)
        assert baseline.definition == definition.name
    tuned = find_task("rmsnorm_tuned", EXAMPLE / "kernels")  # found from a subfolder too
    baseline = tuned.baseline_solution(tuned.load_definition())
    assert baseline.name == "rmsnorm" and baseline.spec.binding == Binding.C
    assert find_task("rmsnorm", EXAMPLE).baseline_solution(tuned.load_definition()).spec.language == Language.PYTHON


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / CONFIG_NAME
    path.write_text(text)
    return path


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="is not valid TOML"):
        load_tasks(_config(tmp_path, "[[kernel]\nname = 1"))


def test_a_misspelled_field_is_named(tmp_path: Path) -> None:
    text = '[[kernel]]\nname="k"\nsource="k.cpp"\nlanguage="cpp"\nentry="k"\ndefinition="d.json"\nworkload="w"\n'
    with pytest.raises(TaskError, match="workload"):
        load_tasks(_config(tmp_path, text))


def test_an_unknown_language_is_named(tmp_path: Path) -> None:
    text = '[[kernel]]\nname="k"\nsource="k.f90"\nlanguage="fortran"\nentry="k"\ndefinition="d"\nworkloads="w"\n'
    with pytest.raises(TaskError, match="language"):
        load_tasks(_config(tmp_path, text))


def test_no_config_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=f"no {CONFIG_NAME} in"):
        find_task("k", tmp_path)
