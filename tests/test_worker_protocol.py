"""The worker process on its own: JSON lines in and out, bad lines answered, shutdown honoured."""

from __future__ import annotations

import io
import queue
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, kernel_solution
from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.gpu_bench.task import load_definition, load_workloads
from evoteam.gpu_bench.worker.evaluate import EvalConfig
from evoteam.gpu_bench.worker.protocol import RESPONSE, BuildRequest, Built, Evaluated, EvaluateRequest, Failed, Ready

pytestmark = pytest.mark.integration


def test_worker_speaks_json_lines_and_survives_garbage(tmp_path: Path) -> None:
    definition = load_definition(DATA / "scale_add.json")
    workload = load_workloads(DATA / "scale_add.jsonl")[0]
    solution = kernel_solution("prints.cpp")
    proc = subprocess.Popen(
        [sys.executable, "-m", "evoteam.gpu_bench.worker", "--log", str(tmp_path / "log"), "--cache", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> Ready | Built | Evaluated | Failed:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return RESPONSE.validate_json(proc.stdout.readline())

    try:
        ready = RESPONSE.validate_json(proc.stdout.readline())
        assert isinstance(ready, Ready) and ready.pid == proc.pid
        bad = ask("this is not json")
        assert isinstance(bad, Failed) and bad.error == "protocol"
        unknown = ask('{"kind": "launch_missiles", "id": 3}')
        assert isinstance(unknown, Failed) and unknown.error == "protocol"
        built = ask(BuildRequest(id=4, solution=solution, definition=definition).model_dump_json())
        assert isinstance(built, Built) and built.id == 4 and built.build.ok and built.load_error is None
        config = EvalConfig(measure=False)
        request = EvaluateRequest(id=5, definition=definition, workload=workload, solution=solution, config=config)
        evaluated = ask(request.model_dump_json())
        assert isinstance(evaluated, Evaluated) and evaluated.id == 5
        assert evaluated.outcome.status == EvaluationStatus.PASSED
        assert "hello from the kernel" in evaluated.log  # the kernel's printf went to the log, not to stdout
        proc.stdin.write('{"kind": "shutdown"}\n')
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_the_owner_empties_a_log_over_its_limit_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from evoteam.gpu_bench.worker import client

    monkeypatch.setattr(client, "LOG_LIMIT_BYTES", 1000)
    worker = client.WorkerProcess()
    try:
        log = worker._log
        log.write_bytes(b"x" * 1000)
        worker._tend()  # at the limit: kept
        assert log.stat().st_size == 1000 and worker._log_note() == ""
        log.write_bytes(b"y" * 3000 + "last line é\n".encode())
        worker._tend()
        assert log.stat().st_size == 0
        with log.open("ab") as appended:  # writers append: what comes next lands at the new end
            appended.write(b"after\n")
        assert worker.log_tail() == "after\n"
        assert "emptied 1 time(s) while it ran (0 MiB dropped)" in worker._log_note()
        log.write_bytes(b"z" * 50_000 + "last line é\n".encode())
        assert worker.log_tail(12) == "last line é\n"  # the tail alone is read, whole characters
    finally:
        worker.close()


class CountingStream(io.StringIO):
    """A stream that counts the characters read from it."""

    read_chars = 0

    def readline(self, size: int | None = -1) -> str:
        line = super().readline(size)
        self.read_chars += len(line)
        return line


def test_the_owner_reads_no_line_longer_than_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate in the worker's process can write to the protocol's pipe: a flood with no newline is read
    up to the limit and no further, and the owner says what happened instead of holding it."""
    from evoteam.gpu_bench.worker import client

    monkeypatch.setattr(client, "LINE_LIMIT_CHARS", 1000)
    stream = CountingStream('{"kind": "ready"}\n' + "x" * 50_000 + "\n" + '{"never": "read"}\n')
    lines: queue.Queue[str | None] = queue.Queue()
    client._pump(stream, lines)
    assert [lines.get_nowait(), lines.get_nowait()] == ['{"kind": "ready"}\n', client.OVERSIZED]
    assert lines.empty() and stream.read_chars <= 18 + 1001

    splitter = client.LineSplitter(limit=10)
    assert splitter.feed("ab\ncd") == ["ab\n"]
    assert splitter.feed("ef\n0123456") == ["cdef\n"]
    assert splitter.rest() == ["0123456"]
    assert splitter.feed("789\nabc") == [client.OVERSIZED]  # 11 characters with the newline: over the limit
    assert client.LineSplitter(limit=11).feed("0123456789\n") == ["0123456789\n"]
    flooded = client.LineSplitter(limit=10)
    assert flooded.feed("x" * 6) == [] and flooded.feed("ok\n" + "y" * 11) == ["xxxxxxok\n", client.OVERSIZED]
