"""What a compiler prints is bounded (``sandbox/run.py``): a source whose macros expand to endless
``#pragma message`` is stopped, and its caller (the build helper, the agents' compile tool, the language
server) holds a megabyte of it, not gigabytes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import kernel_solution
from evoteam.gpu_bench.build.check import check_solution
from evoteam.gpu_bench.sandbox import run
from evoteam.gpu_bench.schema import SourceFile

pytestmark = pytest.mark.integration


def test_a_process_that_prints_without_end_is_stopped_with_its_output_bounded(tmp_path: Path) -> None:
    script = "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n"
    started = time.monotonic()
    done = run.bounded_run([sys.executable, "-c", script], tmp_path, dict(os.environ), 60, limit=1 << 20)
    assert time.monotonic() - started < 30
    assert done.returncode == -9
    assert done.stderr.startswith("x" * 1000) and len(done.stderr) < (1 << 20) + 1000
    assert "the compiler printed more than 1024 KiB on one stream; it was stopped" in done.stderr


def test_output_under_the_limit_is_kept_whole_and_input_is_empty(tmp_path: Path) -> None:
    script = "import sys\nprint(repr(sys.stdin.read()))\nsys.stderr.write('é' * 1000)\nsys.exit(3)\n"
    done = run.bounded_run([sys.executable, "-c", script], tmp_path, dict(os.environ), 60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "''\n", "é" * 1000)


def test_a_process_past_its_time_is_killed_with_what_it_started(tmp_path: Path) -> None:
    script = "import subprocess, sys, time\nsubprocess.Popen(['sleep', '600'])\ntime.sleep(600)\n"
    with pytest.raises(subprocess.TimeoutExpired):
        run.bounded_run([sys.executable, "-c", script], tmp_path, dict(os.environ), 2)
    time.sleep(0.5)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == "sleep 600"]
    assert left == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


FLOOD = "\n".join(
    [
        '#define M0 _Pragma("message \\"' + "a" * 1000 + '\\"")',
        *(f"#define M{i} " + " ".join([f"M{i - 1}"] * 10) for i in range(1, 5)),
        *["M4"] * 100,  # a million messages: 2.7 GB of diagnostics
        'extern "C" int scale_add(const float* x, const float* y, float* out, long n) { return 0; }',
    ]
)


def test_a_compile_that_floods_its_diagnostics_is_stopped_and_its_caller_stays_small(tmp_path: Path) -> None:
    """``check_solution`` is what the agents' compile tool and the language server call, in their own
    process: before the bound, its caller was 11.2 GB resident after 10 min and had not returned (stopped by
    hand); with it, it returns in about 4 s with a 1 MB log, having grown by 10 MB."""
    honest = kernel_solution("honest.cpp")
    flood = honest.model_copy(update={"name": "flood", "sources": [SourceFile(path="honest.cpp", content=FLOOD)]})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    result = check_solution(flood, None, tmp_path / "cache")
    took = time.monotonic() - started
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not result.ok
    assert "the compiler printed more than 1024 KiB on one stream; it was stopped" in result.log
    assert took < 30 and grew_mb < 200, (took, grew_mb)


def test_a_compile_that_takes_more_memory_than_a_compiler_may_fails_with_its_own_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300,000 expanded ``#pragma message`` took g++ 1.4 GB; under a 256 MiB limit it stops, saying so."""
    monkeypatch.setattr(run, "compiler_memory", lambda: 256 << 20)
    many = "\n".join([*FLOOD.splitlines()[:5], *["M4"] * 30, FLOOD.splitlines()[-1]]).replace('"a', '"b')
    honest = kernel_solution("honest.cpp")
    heavy = honest.model_copy(update={"name": "heavy", "sources": [SourceFile(path="honest.cpp", content=many)]})
    result = check_solution(heavy, None, tmp_path / "cache")
    assert not result.ok
    assert "out of memory" in result.log or "memory exhausted" in result.log or "Cannot allocate" in result.log, (
        result.log[-800:]
    )


def test_the_memory_wrapper_limits_what_it_runs(tmp_path: Path) -> None:
    from evoteam.gpu_bench.sandbox import landlocked

    script = "try:\n    bytearray(512 << 20)\nexcept MemoryError:\n    print('refused')\n"
    argv = landlocked.command(tmp_path, [sys.executable, "-c", script], memory=256 << 20)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout == "refused\n", done.stderr
    bad = subprocess.run(
        [*argv[:4], "--memory", "lots", "--", "true"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2 and "--memory takes a number of bytes, not 'lots'" in bad.stderr
