"""The build cache checks an entry on every read: a changed, added or removed file, or sources that are not
the solution's, are rebuilt and reported, so a poisoned entry cannot stand in for an honest candidate."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from conftest import DATA, Bench, kernel_solution
from evoteam.gpu_bench.build import cache_space
from evoteam.gpu_bench.build.builder import build, build_key
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.sandbox import IN_SANDBOX_ENV, current, landlock
from evoteam.gpu_bench.schema import EvaluationStatus, SourceFile
from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.worker.client import WorkerLost, WorkerProcess
from evoteam.gpu_bench.worker.protocol import BuildRequest

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
    (every compiler runs through its wrapper, in the sandbox too) no link can be made; where the kernel has
    no Landlock, the links are found and the build refused. Either way the other entry stays as built."""
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
    if landlock.version() >= 1:  # every compiler runs through the Landlock wrapper, inside the sandbox too
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


HANGS = """
constexpr long spin() {
  long s = 0;
  for (long i = 0; i < (1L << 20); ++i)
    for (long j = 0; j < (1L << 20); ++j) s += i ^ j;
  return s;
}
constexpr long forever = spin();  // hours of constant evaluation
extern "C" int scale_add(const float* x, const float* y, float* out, long n) {
  for (long i = 0; i < n; ++i) out[i] = 2 * x[i] + y[i] + static_cast<float>(forever & 0);
  return 0;
}
"""


def test_a_build_killed_mid_way_leaves_nothing_in_the_cache_for_long(tmp_path: Path) -> None:
    """Its worker is killed at the deadline, with its build helper and compiler: the work folder stays, until
    the next build (once no build holds it) removes it."""
    honest = kernel_solution("honest.cpp")
    flags = ["-O2", "-fconstexpr-loop-limit=2147483647", "-fconstexpr-ops-limit=4611686018427387904"]
    spec = honest.spec.model_copy(update={"compile_flags": flags})
    hangs = honest.model_copy(
        update={"name": "hangs", "spec": spec, "sources": [SourceFile(path="k.cpp", content=HANGS)]}
    )
    hangs = hangs.model_copy(update={"spec": spec.model_copy(update={"entry_point": "k.cpp::scale_add"})})
    cache = tmp_path / "cache"
    worker = WorkerProcess(cache)
    try:
        request = BuildRequest(id=worker.next_id(), solution=hangs, definition=load_definition(DATA / "scale_add.json"))
        with pytest.raises(WorkerLost, match="no answer to the build request"):
            worker.build(request, 5)
    finally:
        worker.close()
    (left,) = cache.glob("evoteam-work-*")
    (left / "planted-by-the-test").write_bytes(b"\0" * 4096)
    os.utime(left, (time.time() - 3600,) * 2)  # the grace for a folder not yet locked has passed
    assert build(honest, cache).ok
    assert not left.exists() and list(cache.glob("evoteam-work-*")) == []


def test_a_build_that_leaves_more_than_an_entry_may_hold_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2 GB initialised array built in 16 s and took 1.9 GiB of the shared cache for good; here the
    limit is lowered to 256 KiB and the array is 1 MiB."""
    monkeypatch.setattr(cache_space, "ENTRY_LIMIT_BYTES", 256 << 10)
    honest = kernel_solution("honest.cpp")
    table = SourceFile(path="table.cpp", content="char table[1 << 20] = {1};\n")
    big = honest.model_copy(update={"name": "big", "sources": [*honest.sources, table]})
    result = build(big, tmp_path)
    assert not result.ok
    assert re.search(r"the build left 1\.\d MiB; a build cache entry may hold 256 KiB at most; refused", result.log)
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing kept, no work folder left
    assert build(honest, tmp_path).ok


def test_over_its_limit_the_cache_loses_its_least_recently_used_entry_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache_space.CACHE_LIMIT_ENV, "0.00001")  # about 10 KB: one entry is over it
    first = kernel_solution("honest.cpp")
    assert build(first, tmp_path).ok
    aged = time.time() - 2 * cache_space.EVICT_AFTER_S
    os.utime(tmp_path / build_key(first) / cache_space.MARKER, (aged, aged))
    spec = first.spec.model_copy(update={"compile_flags": ["-O1"]})
    second = first.model_copy(update={"spec": spec})
    result = build(second, tmp_path)
    assert result.ok and "removed the 1 entry used least recently" in result.log
    assert not (tmp_path / build_key(first)).exists() and (tmp_path / build_key(second)).is_dir()
    monkeypatch.setenv(cache_space.CACHE_LIMIT_ENV, "lots")
    third = first.model_copy(update={"spec": first.spec.model_copy(update={"compile_flags": ["-O2", "-g0"]})})
    result = build(third, tmp_path)
    assert (
        result.ok and "EVOTEAM_CACHE_LIMIT_GB='lots' is not a number of GiB; the default, 20.0 GiB, holds" in result.log
    )
