"""The run journal on disk: fsynced appends, contiguous sequence numbers, torn last lines skipped and repaired,
nothing acknowledged lost when the writer is killed with SIGKILL; one running run per kernel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evoteam.supervisor.events import AgentStep, BaseCommitted, RunFinished
from evoteam.supervisor.journal import HEADER, Journal, JournalError
from evoteam.supervisor.lock import KernelLock, RunLocked

pytestmark = pytest.mark.integration


def tick(thread: int, i: int, pad: str = "") -> AgentStep:
    return AgentStep(round=1, step="turn", role="r", agent_id=f"a{thread}", turn=i, result=pad)


def test_appends_are_numbered_and_read_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "run" / "journal.jsonl")
    assert journal.events() == []
    journal.append(BaseCommitted(sha="a" * 40))
    journal.append(tick(0, 1))
    again = Journal(journal.path)
    again.append(RunFinished(reason="rounds"))
    entries = again.entries()
    assert [(e.seq, e.event.kind) for e in entries] == [(0, "base"), (1, "agent_event"), (2, "run_finished")]
    assert entries[0].event == BaseCommitted(sha="a" * 40)
    assert journal.path.read_bytes().startswith(HEADER + b"\n")  # the version line, once
    assert journal.path.read_bytes().count(b'"format"') == 1


def test_threads_never_interleave_or_reuse_numbers(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")

    def work(n: int) -> None:
        for i in range(50):
            journal.append(tick(n, i))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = journal.entries()
    assert [e.seq for e in entries] == list(range(200))
    steps = [e.event for e in entries if isinstance(e.event, AgentStep)]
    for n in range(4):
        assert [s.turn for s in steps if s.agent_id == f"a{n}"] == list(range(50))


def test_a_torn_last_line_is_skipped_then_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append(BaseCommitted(sha="a"))
    with path.open("ab") as handle:
        handle.write(b'{"data":{"sha":"b"},"kind":"ba')
    assert [e.kind for e in Journal(path).events()] == ["base"]
    fresh = Journal(path)
    fresh.append(RunFinished(reason="rounds"))
    assert [(e.seq, e.event.kind) for e in fresh.entries()] == [(0, "base"), (1, "run_finished")]
    assert path.read_bytes().count(b"\n") == 3  # the version line and two events


def test_a_whole_last_event_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(HEADER + b'\n{"data":{"sha":"a"},"kind":"base","seq":0}')
    journal = Journal(path)
    journal.append(RunFinished(reason="rounds"))
    assert [(e.seq, e.event.kind) for e in journal.entries()] == [(0, "base"), (1, "run_finished")]


def test_a_corrupt_line_in_the_middle_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    base = b'{"data":{"sha":"a"},"kind":"base","seq":0}\n'
    path.write_bytes(HEADER + b"\n" + base + b'{"nope":1}\n' + base)
    with pytest.raises(JournalError, match=r"journal.jsonl:3: not a journal event"):
        Journal(path).events()


_WRITER = """
import sys
from pathlib import Path
from evoteam.supervisor.events import AgentStep
from evoteam.supervisor.journal import Journal
journal = Journal(Path(sys.argv[1]))
i = 0
while True:
    journal.append(AgentStep(round=1, step="turn", role="r", agent_id="a", turn=i, result="x" * (i % 200)))
    print(i, flush=True)
    i += 1
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.4])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "journal.jsonl"
    with subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "0"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        acknowledged = [int(line) for line in proc.stdout.read().split()]
    events = [e for e in Journal(path).events() if isinstance(e, AgentStep)]
    last_ack = acknowledged[-1] if acknowledged else 0
    assert len(events) >= last_ack + 1
    assert [e.turn for e in events] == list(range(len(events)))
    Journal(path).append(RunFinished(reason="cancelled"))  # appending after the kill keeps one event per line
    assert Journal(path).entries()[-1].seq == len(events)


def test_a_second_run_on_the_same_kernel_is_refused_and_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    with KernelLock(tmp_path, "rmsnorm", "run-a"):
        with pytest.raises(RunLocked, match=r"being evolved by run run-a \(pid \d+\)"):
            KernelLock(tmp_path, "rmsnorm", "run-b").acquire()
        with KernelLock(tmp_path, "other", "run-c"):
            pass
    script = (
        "import sys, time; from pathlib import Path; from evoteam.supervisor.lock import KernelLock; "
        "KernelLock(Path(sys.argv[1]), 'k', 'held').acquire(); print('ok', flush=True); time.sleep(60)"
    )
    with subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        with pytest.raises(RunLocked, match="held"):
            KernelLock(tmp_path, "k", "mine").acquire()
        holder.kill()
    with KernelLock(tmp_path, "k", "mine"):
        pass
