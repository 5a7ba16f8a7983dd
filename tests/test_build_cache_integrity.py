"""The build cache checks an entry on every read: a changed, added or removed file, or sources that are not
the solution's, are rebuilt and reported, so a poisoned entry cannot stand in for an honest candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Bench, kernel_solution
from evoteam.gpu_bench.build.builder import build, build_key
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import EvaluationStatus

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kernel", ["honest.cpp", "honest.py"])
def test_a_sound_entry_is_reused_without_a_note(tmp_path: Path, kernel: str) -> None:
    solution = kernel_solution(kernel)
    first = build(solution, tmp_path)
    assert first.ok and not first.cached
    again = build(solution, tmp_path)
    assert again.ok and again.cached and "did not match" not in again.log


def test_planted_bytecode_is_caught(tmp_path: Path) -> None:
    solution = kernel_solution("honest.py")
    build(solution, tmp_path)
    entry = tmp_path / build_key(solution)
    (entry / "__pycache__").mkdir(exist_ok=True)
    (entry / "__pycache__" / "honest.cpython-311.pyc").write_bytes(b"forged bytecode")
    again = build(solution, tmp_path)
    assert not again.cached and "__pycache__/honest.cpython-311.pyc" in again.log


def test_a_python_candidate_evaluated_twice_reuses_its_sound_entry(runner: LocalRunner, bench: Bench) -> None:
    first = bench("honest.py", only={"small-1000"})
    again = bench("honest.py", only={"small-1000"})
    assert first.status == again.status == EvaluationStatus.PASSED
    assert again.build.cached and "did not match" not in again.build.log


def test_a_poisoned_artifact_is_rebuilt_and_reported(tmp_path: Path) -> None:
    solution = kernel_solution("honest.cpp")
    first = build(solution, tmp_path)
    assert first.ok and first.artifact is not None
    Path(first.artifact).write_bytes(b"\x7fELF not the build")
    again = build(solution, tmp_path)
    assert again.ok and not again.cached
    assert "did not match its manifest" in again.log and Path(first.artifact).name in again.log
    assert Path(again.artifact or "").read_bytes() != b"\x7fELF not the build"
    assert build(solution, tmp_path).cached  # sound again


def test_swapped_sources_and_extra_files_are_caught(tmp_path: Path) -> None:
    solution = kernel_solution("honest.cpp")
    build(solution, tmp_path)
    entry = tmp_path / build_key(solution)
    (entry / "honest.cpp").write_text("// something else\n")
    (entry / "planted.so").write_bytes(b"x")
    again = build(solution, tmp_path)
    assert not again.cached
    assert "source honest.cpp" in again.log and "planted.so" in again.log
