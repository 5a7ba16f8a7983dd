"""What a candidate writes to disk, bounded (``worker/disk.py``): one file by the worker's file size limit, the
worker's folder by its owner's watch, the disk by its floor. Each writer is a Python candidate, in its Python
host and in the worker's own process, writing at about 100 MiB/s until it is stopped."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hardening import record

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Solution, SourceFile, Workload
from evoteam.gpu_bench.worker.disk import MIB, DiskLimits

pytestmark = pytest.mark.hardening

WRITER = '''"""Writes 1 MiB every 10 ms ({how}) until it is stopped, 1 GiB at most; then computes honestly."""
import os
import tempfile
import time

import torch


def run(x, y, out):
    folder = tempfile.mkdtemp()
    print("WRITING", folder, flush=True)
    chunk = os.urandom(1 << 20)
    held = open(os.path.join(folder, "held"), "wb")
    if {deleted}:
        os.unlink(held.name)
    for n in range(1024):
        if {one_file}:
            held.write(chunk)
            held.flush()
        else:
            with open(os.path.join(folder, f"part{{n}}"), "wb") as part:
                part.write(chunk)
        time.sleep(0.01)
    torch.add(2 * x, y, out=out)
'''


def writer(how: str, deleted: bool = False, one_file: bool = False) -> Solution:
    base = kernel_solution("honest.py")
    source = WRITER.format(how=how, deleted=deleted, one_file=one_file or deleted)
    return base.model_copy(update={"name": "writer", "sources": [SourceFile(path="honest.py", content=source)]})


ISOLATION = pytest.mark.parametrize("isolate", [True, False], ids=["python host", "in the worker"])


def evaluate(
    tmp_path: Path, definition: Definition, workload: Workload, solution: Solution, limits: DiskLimits, isolate: bool
) -> tuple[EvaluationStatus, str, str, LocalRunner]:
    runner = LocalRunner(cache_root=tmp_path / "cache", disk_limits=limits)
    config = quick_config(measure=False, timeout_s=30.0).model_copy(update={"isolate": isolate})
    run = runner.run(definition, [workload], solution, config, None)
    outcome = run.workloads[0].outcome
    return outcome.status, outcome.reason or "", run.workloads[0].log, runner


@ISOLATION
def test_a_candidate_that_fills_its_folder_is_stopped_and_its_files_removed(
    tmp_path: Path, definition: Definition, workloads: list[Workload], isolate: bool
) -> None:
    solution = writer("a file each")
    limits = DiskLimits(limit_bytes=32 * MIB, walk_after_bytes=4 * MIB)
    status, reason, log, runner = evaluate(tmp_path, definition, workloads[0], solution, limits, isolate)
    try:
        written = re.search(r"the candidate wrote (\d+) MiB in the worker's folder", reason)
        folder = Path(re.findall(r"WRITING (\S+)", log)[0])
        held = status == EvaluationStatus.RUNTIME_ERROR and written is not None and not folder.exists()
        where = "its Python host" if isolate else "the worker"
        figure = f"{status.value} after {written.group(1) if written else '?'} MiB (limit 32 MiB); files removed"
        record("disk", f"a candidate filling its folder ({where})", figure, held)
        assert status == EvaluationStatus.RUNTIME_ERROR, reason
        assert written is not None and "more than the 32 MiB it may" in reason, reason
        assert not folder.exists()  # the worker's folder was emptied (its log kept: the line above)
        again = runner.run(definition, workloads[:1], kernel_solution("honest.py"), quick_config(measure=False), None)
        assert again.workloads[0].outcome.status == EvaluationStatus.PASSED  # a fresh worker
    finally:
        runner.close()


@ISOLATION
def test_no_file_grows_past_the_worker_s_file_size_limit(
    tmp_path: Path, definition: Definition, workloads: list[Workload], isolate: bool
) -> None:
    solution = writer("one file", one_file=True)
    limits = DiskLimits(file_bytes=8 * MIB)
    status, reason, log, runner = evaluate(tmp_path, definition, workloads[0], solution, limits, isolate)
    try:
        large = Path(re.findall(r"WRITING (\S+)", log)[0]) / "held"
        size = large.stat().st_size if large.exists() else 0
        said = "File too large" in reason or "File too large" in log
        where = "its Python host" if isolate else "the worker"
        error = "File too large" if said else reason[:60]
        figure = f"{status.value}; the file stopped at {size >> 20} MiB (limit 8 MiB): {error}"
        record("disk", f"one file past the file size limit ({where})", figure, said and size <= 8 * MIB)
        assert status == EvaluationStatus.RUNTIME_ERROR, reason
        assert said, (reason, log[-2000:])
        assert size <= 8 * MIB
        assert runner._worker is not None and runner._worker.environment is not None
        assert runner._worker.environment.libs["file_size"] == "each file at most 8 MiB; no core dumps"
    finally:
        runner.close()


@ISOLATION
def test_a_file_deleted_but_kept_open_is_caught_by_the_disk_s_floor(
    tmp_path: Path, definition: Definition, workloads: list[Workload], isolate: bool
) -> None:
    """No walk finds it: the disk's free space falling below its floor (set here 48 MiB under what is free
    now) stops the worker, which frees it."""
    solution = writer("into a file it deleted", deleted=True)
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    limits = DiskLimits(floor_bytes=free - 48 * MIB, floor_drop_bytes=32 * MIB, walk_after_bytes=4 * MIB)
    status, reason, _, runner = evaluate(tmp_path, definition, workloads[0], solution, limits, isolate)
    runner.close()
    held = status == EvaluationStatus.RUNTIME_ERROR and "the disk that holds the worker's folder fell to" in reason
    where = "its Python host" if isolate else "the worker"
    fell = re.search(r"fell to (.+?) free during this request \(from (.+?);", reason)
    figure = f"{status.value}: the disk fell from {fell.group(2)} to {fell.group(1)} free" if fell else reason[:90]
    record("disk", f"a file deleted but kept open ({where}; the floor 48 MiB under the free space)", figure, held)
    assert status == EvaluationStatus.RUNTIME_ERROR, reason
    assert "the disk that holds the worker's folder fell to" in reason, reason
    assert "files it deleted but kept open" in reason
