"""The worker's own writes: the build cache is written by its build helper alone, and a candidate that runs
in the worker's process can neither rewrite a cache entry nor the flush library that later workers load,
nor end the helper without its worker being replaced (``worker/writes.py``, ``worker/build_helper.py``)."""

from __future__ import annotations

import io
import os
import re
import signal
import time
from pathlib import Path

import pytest
from hardening import needs_sandbox

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.build.builder import build_key
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.sandbox import landlock
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, SourceFile, Workload
from evoteam.gpu_bench.timing import flush_library
from evoteam.gpu_bench.worker import build_helper
from evoteam.gpu_bench.worker.extension_dirs import TRITON, folder_name

WRITER = '''"""Tries to write each target once, then computes honestly."""
import os
from pathlib import Path

import torch

TARGETS = {targets!r}
_done = []


def run(x, y, out):
    if not _done:
        _done.append(True)
        print("TRITON", os.environ.get("TRITON_CACHE_DIR"))
        for target in TARGETS:
            try:
                Path(target).write_bytes(b"planted by a candidate")
                print("WROTE", target)
            except OSError as exc:
                print("REFUSED", exc.errno, target)
    torch.add(2 * x, y, out=out)
'''

HELPER_KILLER = '''"""Ends every build helper among its own process's children, then computes honestly."""
import os
import signal

import torch

_done = []


def run(x, y, out):
    if not _done:
        _done.append(True)
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                kids = f.read().split()
            for kid in kids:
                with open(f"/proc/{kid}/cmdline", "rb") as f:
                    if b"build_helper" in f.read():
                        os.kill(int(kid), signal.SIGKILL)
                        print("KILLED", kid)
    torch.add(2 * x, y, out=out)
'''


LOCK_TAMPERER = '''"""Tries to remove, replace and make lock files in the GPU lock folder, then computes honestly."""
import os
from pathlib import Path

import torch

_done = []


def run(x, y, out):
    if not _done:
        _done.append(True)
        locks = Path(os.environ["EVOTEAM_GPU_LOCKS"])
        held = locks / "uuid-held.lock"
        for what, act in (
            ("unlink", lambda: held.unlink()),
            ("replace", lambda: ((locks / "mine.tmp").write_text("x"), (locks / "mine.tmp").replace(held))),
            ("link", lambda: (locks / "link.lock").symlink_to(held)),
            ("make", lambda: (locks / "uuid-other.lock").write_text("")),
        ):
            try:
                act()
                print("DONE", what)
            except OSError as exc:
                print("REFUSED", what, exc.errno)
    torch.add(2 * x, y, out=out)
'''


SHM_LEAVER = '''"""Leaves a file of 4 MiB in /dev/shm on its first call, then computes honestly."""
from pathlib import Path

import torch

_done = []


def run(x, y, out):
    if not _done:
        _done.append(True)
        print("FOUND", sorted(p.name for p in Path("/dev/shm").iterdir()))
        Path("/dev/shm/left-behind").write_bytes(b"x" * (4 << 20))
    torch.add(2 * x, y, out=out)
'''


def _digests(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.integration
@pytest.mark.skipif(landlock.version() < 1, reason="this Linux kernel has no Landlock")
def test_a_candidate_in_the_worker_cannot_rewrite_the_build_cache_or_the_flush_library(
    tmp_path: Path, definition: Definition, workloads: list[Workload]
) -> None:
    cache = tmp_path / "cache"
    victim = kernel_solution("honest.cpp")
    flush = flush_library.library()
    entry = cache / build_key(victim)
    targets = [entry / "kernel.so", entry / "manifest.json", cache / "planted.so"]
    targets += [flush] if flush is not None else []
    writer = kernel_solution("honest.py")
    source = WRITER.format(targets=[str(t) for t in targets])
    writer = writer.model_copy(update={"name": "writer", "sources": [SourceFile(path="honest.py", content=source)]})
    runner = LocalRunner(cache_root=cache)
    config = quick_config(measure=False, isolate=False)  # the candidate runs in the worker's own process
    try:
        first = runner.run(definition, workloads[:1], victim, config, None)
        assert first.workloads[0].outcome.status == EvaluationStatus.PASSED
        assert first.environment.libs["writes"].startswith("confined"), first.environment.libs
        before = _digests(entry)
        flushed = flush.read_bytes() if flush is not None else b""

        run = runner.run(definition, workloads[:1], writer, config, None)
        assert run.workloads[0].outcome.status == EvaluationStatus.PASSED
        log = run.workloads[0].log
        assert "WROTE" not in log, log
        refused = re.findall(r"REFUSED (\d+) (\S+)", log)
        assert [Path(path) for _, path in refused] == targets
        assert {errno for errno, _ in refused} == {"13"}  # EACCES: Landlock, not the sandbox's read-only root
        triton = Path(re.findall(r"TRITON (\S+)", log)[0])  # Triton's cache: the solution's own folder
        assert triton.parent.name == TRITON and triton.name == folder_name(writer.content_hash())

        assert _digests(entry) == before and not (cache / "planted.so").exists()
        assert flush is None or flush.read_bytes() == flushed
        runner.close()  # a fresh worker reads the entry again
        again = runner.run(definition, workloads[:1], victim, config, None)
        assert again.build.cached and again.workloads[0].outcome.status == EvaluationStatus.PASSED
    finally:
        runner.close()


@pytest.mark.integration
def test_a_candidate_that_ends_the_build_helper_gets_its_worker_replaced(
    tmp_path: Path, definition: Definition, workloads: list[Workload]
) -> None:
    killer = kernel_solution("honest.py")
    killer = killer.model_copy(
        update={"name": "killer", "sources": [SourceFile(path="honest.py", content=HELPER_KILLER)]}
    )
    runner = LocalRunner(cache_root=tmp_path / "cache")
    config = quick_config(measure=False, isolate=False)
    try:
        run = runner.run(definition, workloads[:1], killer, config, None)
        log = run.workloads[0].log
        assert "KILLED" in log, log
        assert "the worker's build helper was ended during this request" in log
        assert "the worker was replaced" in log
        after = runner.run(definition, workloads[:1], kernel_solution("honest.cpp"), config, None)
        assert after.build.ok and after.workloads[0].outcome.status == EvaluationStatus.PASSED
    finally:
        runner.close()


@pytest.mark.integration
def test_the_build_helper_builds_and_says_when_it_is_gone(tmp_path: Path) -> None:
    helper = build_helper.BuildHelper(tmp_path / "cache")
    try:
        built = helper.build(kernel_solution("honest.py"))
        assert built.ok and built.artifact is not None
        assert Path(built.artifact).parent == tmp_path / "cache"
        os.kill(helper.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while helper.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not helper.alive
        with pytest.raises(build_helper.BuildHelperLost, match="killed by SIGKILL"):
            helper.build(kernel_solution("honest.py"))
    finally:
        helper.close()


@pytest.mark.unit
def test_the_build_helper_answers_each_request_with_its_build(tmp_path: Path) -> None:
    solution = kernel_solution("honest.py")
    requests = "".join(build_helper.HelperRequest(id=n, solution=solution).model_dump_json() + "\n" for n in (1, 2))
    out = io.StringIO()
    assert build_helper.serve(io.StringIO(requests), out, tmp_path) == 0
    answers = [build_helper.HelperAnswer.model_validate_json(line) for line in out.getvalue().splitlines()]
    assert [a.id for a in answers] == [1, 2]
    assert answers[0].result.ok and not answers[0].result.cached and answers[1].result.cached
    assert build_helper.serve(io.StringIO("not a request\n"), io.StringIO(), tmp_path) == 2


@pytest.mark.integration
@pytest.mark.skipif(landlock.version() < 1, reason="this Linux kernel has no Landlock")
def test_a_candidate_in_the_worker_cannot_remove_or_replace_a_gpu_lock_file(
    tmp_path: Path, definition: Definition, workloads: list[Workload], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed while another worker holds it would let a third take a new one and time beside it:
    the worker may make lock files, never remove, replace or link one."""
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "uuid-held.lock").write_text("")
    monkeypatch.setenv("EVOTEAM_GPU_LOCKS", str(locks))
    tamperer = kernel_solution("honest.py")
    tamperer = tamperer.model_copy(
        update={"name": "locks", "sources": [SourceFile(path="honest.py", content=LOCK_TAMPERER)]}
    )
    runner = LocalRunner(cache_root=tmp_path / "cache")
    try:
        run = runner.run(definition, workloads[:1], tamperer, quick_config(measure=False, isolate=False), None)
    finally:
        runner.close()
    assert run.workloads[0].outcome.status == EvaluationStatus.PASSED
    log = run.workloads[0].log
    assert re.findall(r"(DONE|REFUSED) (\w+)", log) == [
        ("REFUSED", "unlink"),
        ("REFUSED", "replace"),
        ("REFUSED", "link"),
        ("DONE", "make"),
    ], log
    assert (locks / "uuid-held.lock").is_file() and not (locks / "uuid-held.lock").is_symlink()


@pytest.mark.integration
@needs_sandbox()
def test_a_candidate_that_leaves_files_in_dev_shm_gets_its_worker_replaced(
    tmp_path: Path, definition: Definition, workloads: list[Workload]
) -> None:
    """The sandbox's /dev/shm is the worker's, shared by the candidates it runs in turn: what one leaves there
    holds memory until the worker ends and could fill it for the next. Such a worker answers and is replaced,
    and the next candidate finds /dev/shm empty."""
    leaver = kernel_solution("honest.py")
    leaver = leaver.model_copy(update={"name": "leaver", "sources": [SourceFile(path="honest.py", content=SHM_LEAVER)]})
    runner = LocalRunner(cache_root=tmp_path / "cache")
    try:
        first = runner.run(definition, workloads[:1], leaver, quick_config(measure=False), None)
        second = runner.run(definition, workloads[:1], leaver, quick_config(measure=False), None)
    finally:
        runner.close()
    for run in (first, second):
        assert run.workloads[0].outcome.status == EvaluationStatus.PASSED
        log = run.workloads[0].log
        assert "FOUND []" in log, log  # a fresh /dev/shm each time
        assert "the candidate left 1 entry in /dev/shm (left-behind; 4.0 MiB)" in log, log
        assert "the worker was replaced" in log, log
