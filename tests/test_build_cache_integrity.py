"""The build cache checks an entry on every read: a changed, added or removed file, or sources that are not
the solution's, are rebuilt and reported, so a poisoned entry cannot stand in for an honest candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Bench, kernel_solution
from evoteam.gpu_bench.build.builder import build, build_key
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.sandbox import IN_SANDBOX_ENV, current, landlock
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


@pytest.mark.parametrize("where", ["wrapped by the sandbox", "held by Landlock"])
def test_a_compile_that_leaves_links_cannot_steer_the_builder_s_writes_into_another_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """gcc's ``-wrapper`` runs each compiler pass through a program of the solution's choosing: here a shell
    that links the new entry's ``result.json`` and ``manifest.json`` to another entry's ``kernel.so`` and
    ``manifest.json``, so that the builder's own writes would land there. Where Landlock holds the compiler
    (no sandbox wraps it: the worker's build helper) no link can be made; where the sandbox wraps it, the
    links are found and the build refused. Either way the other entry stays as built."""
    if where == "held by Landlock":
        if landlock.version() < 1:
            pytest.skip("this Linux kernel has no Landlock")
        monkeypatch.setenv(IN_SANDBOX_ENV, "1")
    elif not current().isolated:
        pytest.skip("no sandbox here")
    victim = kernel_solution("honest.cpp")
    assert build(victim, tmp_path).ok
    entry = tmp_path / build_key(victim)
    before = {p.name: p.read_bytes() for p in entry.iterdir() if p.is_file()}
    script = (
        f"ln -s ../{entry.name}/kernel.so result.json; ln -s ../{entry.name}/manifest.json manifest.json; "
        'exec "$0" "$@"'
    )
    attacker = kernel_solution("honest.cpp")
    spec = attacker.spec.model_copy(update={"compile_flags": ["-O2", "-wrapper", f"sh,-c,{script}"]})
    attacker = attacker.model_copy(update={"name": "linker", "spec": spec})
    built = build(attacker, tmp_path)
    if where == "held by Landlock":
        assert built.ok and not any(p.is_symlink() for p in (tmp_path / build_key(attacker)).iterdir())
    else:
        assert not built.ok and "result.json" in built.log and "refused" in built.log, built.log[-600:]
    assert {p.name: p.read_bytes() for p in entry.iterdir() if p.is_file()} == before
    assert build(victim, tmp_path).cached


def test_a_build_that_leaves_a_file_with_two_names_is_refused(tmp_path: Path) -> None:
    """A hard link: writing one name writes the other (in a build folder both names are its own, but where
    no sandbox or Landlock holds the compiler, the second could be another entry's file)."""
    solution = kernel_solution("honest.cpp")
    spec = solution.spec.model_copy(
        update={"compile_flags": ["-O2", "-wrapper", 'sh,-c,ln honest.cpp twin.cpp; exec "$0" "$@"']}
    )
    built = build(solution.model_copy(update={"name": "twins", "spec": spec}), tmp_path)
    assert not built.ok and "honest.cpp" in built.log and "twin.cpp" in built.log and "refused" in built.log
