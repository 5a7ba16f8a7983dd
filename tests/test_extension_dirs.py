"""Run-time builds of Python candidates (torch extensions, Inductor): one folder per solution in the worker's
private folder, and the owner's audit that removes what one request wrote into another solution's folder."""

from __future__ import annotations

import gc
import os
import re
import time
from pathlib import Path

import pytest

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.sandbox import landlock
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, SourceFile, Workload
from evoteam.gpu_bench.worker import extension_dirs
from evoteam.gpu_bench.worker.client import WorkerProcess
from evoteam.gpu_bench.worker.extension_dirs import EXTENSIONS, INDUCTOR, ExtensionAudit, folder_for, folder_name


@pytest.mark.unit
def test_a_folder_changes_only_in_a_request_for_its_solution(tmp_path: Path) -> None:
    audit = ExtensionAudit(tmp_path)
    mine, theirs = folder_for(tmp_path, EXTENSIONS, "a" * 64), folder_for(tmp_path, EXTENSIONS, "b" * 64)
    (mine / "ext").mkdir(parents=True)
    (mine / "ext" / "ext.so").write_bytes(b"built by a")
    assert audit.after(["a" * 64]) == []  # its own request: recorded

    (theirs / "ext").mkdir(parents=True)
    (theirs / "ext" / "ext.so").write_bytes(b"built by b")
    assert audit.after(["b" * 64]) == []

    (theirs / "ext" / "ext.so").write_bytes(b"planted by a")  # a's request writes into b's folder
    (mine / "ext" / "more.so").write_bytes(b"a's own, lazily")
    removed = audit.after(["a" * 64])
    assert removed == [f"{EXTENSIONS}/{folder_name('b' * 64)}"]
    assert not theirs.exists() and (mine / "ext" / "more.so").is_file()


@pytest.mark.unit
def test_folders_and_files_nobody_owns_are_removed(tmp_path: Path) -> None:
    audit = ExtensionAudit(tmp_path)
    stranger = folder_for(tmp_path, INDUCTOR, "c" * 64)
    stranger.mkdir(parents=True)
    (stranger / "graph.py").write_text("planted")
    (tmp_path / INDUCTOR / "loose.so").write_bytes(b"x")
    (tmp_path / EXTENSIONS).mkdir()
    (tmp_path / EXTENSIONS / folder_name("d" * 64)).symlink_to(stranger)
    removed = audit.after(["d" * 64])  # even its owner's name may not be a link elsewhere
    assert sorted(removed) == sorted(
        [f"{INDUCTOR}/{folder_name('c' * 64)}", f"{INDUCTOR}/loose.so", f"{EXTENSIONS}/{folder_name('d' * 64)}"]
    )
    assert not any((tmp_path / INDUCTOR).iterdir()) and not any((tmp_path / EXTENSIONS).iterdir())


@pytest.mark.integration  # it waits past the file system's timestamp granularity
def test_the_audit_reads_no_content_and_still_sees_a_rewrite_that_keeps_size_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate's file may be of any size at no cost to it (a sparse one): the audit reads only metadata.
    A rewrite of another solution's file to the same size, its modification time set back, still shows: the
    change time is the kernel's, and no process can set it."""
    audit = ExtensionAudit(tmp_path)
    mine, theirs = folder_for(tmp_path, INDUCTOR, "a" * 64), folder_for(tmp_path, INDUCTOR, "b" * 64)
    mine.mkdir(parents=True)
    with (mine / "huge.bin").open("wb") as huge:
        huge.truncate(1 << 40)  # 1 TiB, sparse

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the audit read a file's content")

    with monkeypatch.context() as reading:
        reading.setattr(Path, "read_bytes", no_reading)
        reading.setattr(Path, "open", no_reading)
        assert audit.after(["a" * 64]) == []
    theirs.mkdir(parents=True)
    (theirs / "graph.so").write_bytes(b"built by b")
    assert audit.after(["b" * 64]) == []
    before = (theirs / "graph.so").stat()
    time.sleep(0.05)  # past the file system's timestamp granularity
    (theirs / "graph.so").write_bytes(b"built by B")
    os.utime(theirs / "graph.so", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert audit.after(["a" * 64]) == [f"{INDUCTOR}/{folder_name('b' * 64)}"]
    assert (mine / "huge.bin").is_file() and not theirs.exists()


PLANTER = '''"""Writes into its own run-time build folder and into another solution's, then computes honestly."""
import os
from pathlib import Path

import torch

_done = []


def run(x, y, out):
    if not _done:
        own = Path(os.environ["TORCH_EXTENSIONS_DIR"])
        (own / "mine").mkdir(parents=True, exist_ok=True)
        (own / "mine" / "mine.so").write_bytes(b"own build")
        other = own.parent / "{victim}" / "victim_ext"
        print("OWN", own / "mine" / "mine.so")
        try:
            other.mkdir(parents=True, exist_ok=True)
            (other / "victim_ext.so").write_bytes(b"planted")
            print("PLANTED", other / "victim_ext.so")
        except OSError as exc:
            print("REFUSED", exc.errno, other / "victim_ext.so")
        _done.append(True)
    torch.add(2 * x, y, out=out)
'''


@pytest.mark.integration
@pytest.mark.parametrize("isolate", [True, False], ids=["python host", "in the worker"])
def test_a_candidate_s_write_into_another_solution_s_build_folder_is_refused_or_removed(
    tmp_path: Path, definition: Definition, workloads: list[Workload], isolate: bool
) -> None:
    """In its Python host (Landlock) the write is refused; in the worker, the audit removes and reports it."""
    victim = kernel_solution("honest.py")
    source = PLANTER.format(victim=folder_name(victim.content_hash()))
    planter = victim.model_copy(update={"name": "planter", "sources": [SourceFile(path="honest.py", content=source)]})
    runner = LocalRunner(cache_root=tmp_path / "cache")
    config = quick_config(measure=False).model_copy(update={"isolate": isolate})
    try:
        run = runner.run(definition, workloads[:1], planter, config, None)
        assert run.workloads[0].outcome.status == EvaluationStatus.PASSED
        log = run.workloads[0].log
        own = Path(re.findall(r"OWN (\S+)", log)[0])
        assert own.is_file()  # its own folder is its to write
        assert ("REFUSED" in log) is (isolate and landlock.version() > 0)
        if "REFUSED" in log:
            refused = re.findall(r"REFUSED (\d+) (\S+)", log)[0]
            assert isolate and refused[0] == "13" and not Path(refused[1]).exists()  # EACCES
            assert "another solution" not in log
        else:
            planted = Path(re.findall(r"PLANTED (\S+)", log)[0])
            assert "changed what another solution built at run time" in log
            assert not planted.exists()
        again = runner.run(definition, workloads[:1], victim, config, None)
        assert again.workloads[0].outcome.status == EvaluationStatus.PASSED
        assert "another solution" not in again.workloads[0].log
    finally:
        runner.close()
    assert not own.exists()  # the worker's private folder goes with it


@pytest.mark.unit
def test_a_worker_s_private_folder_goes_with_it_even_unclosed() -> None:
    """Its log and run-time builds: removed by ``close``, or when the object goes (or at exit) without one."""
    worker = WorkerProcess()
    folder = worker._log_dir
    assert folder.is_dir()
    del worker
    gc.collect()
    assert not folder.exists()


@pytest.mark.unit
def test_a_folder_of_more_entries_than_the_audit_looks_at_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate can make millions of files in its time limit, and the owner would list them all: past the
    limit the solution's folder (or a kind's folder, with all it holds) goes, and the log says why."""
    monkeypatch.setattr(extension_dirs, "ENTRY_LIMIT", 5)
    audit = ExtensionAudit(tmp_path)
    mine, theirs = folder_for(tmp_path, INDUCTOR, "a" * 64), folder_for(tmp_path, INDUCTOR, "b" * 64)
    (mine / "deep").mkdir(parents=True)
    for n in range(5):
        (mine / "deep" / f"f{n}").write_text("x")
    theirs.mkdir(parents=True)
    (theirs / "graph.so").write_text("built by b")
    assert audit.after(["b" * 64, "a" * 64]) == [f"{INDUCTOR}/{folder_name('a' * 64)} (more than 5 entries)"]
    assert not mine.exists() and (theirs / "graph.so").is_file()  # even in its own request
    for n in range(5):
        (tmp_path / INDUCTOR / f"stray{n}").write_text("x")
    assert audit.after(["b" * 64]) == [f"{INDUCTOR} (all of it: more than 5 entries)"]
    assert not (tmp_path / INDUCTOR).exists()
