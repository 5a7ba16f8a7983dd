"""The worker's build helper: the one process of a worker that may write the shared build cache.

A candidate that runs in the worker's own process (a CUDA kernel, a Python candidate on a GPU, any candidate
with ``--no-isolate``) could otherwise rewrite another solution's cache entry and its manifest to match: the
entry would then pass its check on read in every later worker, run and session that shares the cache. So the
worker starts this helper before any candidate loads, then gives up writing anywhere but its own folders
(``worker/writes.py``), the cache included. The helper builds what it is asked to (``builder.build``: an
entry named by a hash of the sources, flags and compiler), so whoever asks, what it writes is the honest
build of what was asked for. It is non-dumpable (no process of the sandbox may trace it or write its memory)
and dies with the worker.

The protocol is one JSON line each way on the helper's stdin and stdout; a lost helper (a candidate killed
it) is ``BuildHelperLost``, and the worker that finds it dead ends with the request that killed it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ValidationError

from evoteam.gpu_bench.build.builder import BuildResult, build
from evoteam.gpu_bench.schema import Solution
from evoteam.gpu_bench.worker import process_state, strays


class HelperRequest(BaseModel):
    id: int
    solution: Solution


class HelperAnswer(BaseModel):
    id: int
    result: BuildResult


class BuildHelperLost(RuntimeError):
    """The helper died or answered out of turn: builds in this worker are over."""


class BuildHelper:
    """The worker's handle on its helper process (one build at a time)."""

    def __init__(self, cache_root: Path | None) -> None:
        command = [sys.executable, "-m", "evoteam.gpu_bench.worker.build_helper", "--worker", str(os.getpid())]
        command += ["--cache", str(cache_root)] if cache_root is not None else []
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            close_fds=True,
        )
        self._next = 0

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def build(self, solution: Solution) -> BuildResult:
        """``builder.build(solution)`` done by the helper; ``BuildHelperLost`` where it is gone."""
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        self._next += 1
        try:
            stdin.write(HelperRequest(id=self._next, solution=solution).model_dump_json() + "\n")
            stdin.flush()
            line = stdout.readline()
        except (OSError, ValueError) as exc:
            raise BuildHelperLost(f"the build helper is gone ({_death(self._proc)}; {exc})") from exc
        if not line:
            raise BuildHelperLost(f"the build helper is gone ({_death(self._proc)})")
        try:
            answer = HelperAnswer.model_validate_json(line)
        except ValidationError as exc:
            raise BuildHelperLost(f"the build helper answered something else ({exc.errors()[:1]})") from exc
        if answer.id != self._next:
            raise BuildHelperLost(f"the build helper answered request {answer.id}, not {self._next}")
        return answer.result

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):  # it is gone already
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _death(proc: subprocess.Popen[str]) -> str:
    code = proc.poll()
    if code is None:
        return "it closed its output"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def serve(lines: IO[str], out: IO[str], cache_root: Path | None) -> int:
    """Answers each request line with the build's result; a request it cannot read ends it (its worker then
    finds it gone)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            request = HelperRequest.model_validate_json(line)
        except ValidationError as exc:
            print(f"evoteam build helper: an unreadable request ({exc.errors()[:1]})", file=sys.stderr)
            return 2
        try:
            result = build(request.solution, cache_root)
        except Exception as exc:  # any failure of a build is that build's result
            result = BuildResult(ok=False, log=f"evoteam's build failed: {type(exc).__name__}: {exc}")
        out.write(HelperAnswer(id=request.id, result=result).model_dump_json() + "\n")
        out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evoteam.gpu_bench.worker.build_helper")
    parser.add_argument("--cache", type=Path, default=None, help="build cache folder")
    parser.add_argument("--worker", type=int, required=True, help="the pid of the worker it serves")
    args = parser.parse_args(argv)
    process_state.forbid_inspection()  # no process without CAP_SYS_PTRACE traces it or opens its memory
    if not strays.die_with(args.worker):  # killed when the worker's thread that started it ends
        return 0
    sys.dont_write_bytecode = True  # build cache entries stay as built
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the protocol on a private fd: a print goes to stderr
    os.dup2(2, 1)
    return serve(sys.stdin, answers, args.cache)


if __name__ == "__main__":
    sys.exit(main())
